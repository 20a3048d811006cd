//! Addresses and networks of the egress allowlist, shared by both layers.
use std::net::IpAddr;

/// An address with a prefix length: `10.0.0.0/8`, `::1/128`, or a bare address (full length).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// The network address; no bits set beyond `prefix`.
    pub addr: IpAddr,
    /// Prefix length: 0..=32 for IPv4, 0..=128 for IPv6.
    pub prefix: u8,
}

impl Cidr {
    /// Parses `ADDR` or `ADDR/PREFIX`. Host bits set beyond the prefix are refused, so a
    /// typo like `10.1.2.3/8` does not silently widen to `10.0.0.0/8`.
    pub fn parse(s: &str) -> Result<Cidr, String> {
        let (a, p) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = a
            .trim()
            .parse()
            .map_err(|_| format!("`{s}` is not an IP address or network"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            None => max,
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|&p| p <= max)
                .ok_or_else(|| format!("`{s}`: prefix must be 0..={max}"))?,
        };
        let c = Cidr { addr, prefix };
        if c.network_bytes() != c.addr_bytes() {
            return Err(format!("`{s}` has host bits set beyond /{prefix}"));
        }
        Ok(c)
    }

    /// The address in network byte order, IPv4 in the first 4 bytes.
    pub fn addr_bytes(&self) -> [u8; 16] {
        let mut out = [0u8; 16];
        match self.addr {
            IpAddr::V4(a) => out[..4].copy_from_slice(&a.octets()),
            IpAddr::V6(a) => out.copy_from_slice(&a.octets()),
        }
        out
    }

    /// The netmask in the same layout as [`Cidr::addr_bytes`].
    pub fn mask_bytes(&self) -> [u8; 16] {
        let mut out = [0u8; 16];
        for (i, b) in out.iter_mut().enumerate() {
            let bits = (self.prefix as usize).saturating_sub(i * 8).min(8);
            *b = if bits == 0 { 0 } else { 0xffu8 << (8 - bits) };
        }
        out
    }

    fn network_bytes(&self) -> [u8; 16] {
        let (a, m) = (self.addr_bytes(), self.mask_bytes());
        std::array::from_fn(|i| a[i] & m[i])
    }

    /// Whether `ip` lies inside this network (an IPv4-mapped IPv6 address counts as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 @ IpAddr::V4(_) => v4,
        };
        if ip.is_ipv4() != self.addr.is_ipv4() {
            return false;
        }
        let probe = Cidr {
            addr: ip,
            prefix: self.prefix,
        };
        probe.network_bytes() == self.network_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_matches() {
        let c = Cidr::parse("10.0.0.0/8").unwrap();
        assert!(c.contains("10.200.1.1".parse().unwrap()));
        assert!(!c.contains("11.0.0.1".parse().unwrap()));
        assert!(c.contains("::ffff:10.0.0.1".parse().unwrap()));
        let h = Cidr::parse("127.0.0.1").unwrap();
        assert_eq!(h.prefix, 32);
        assert_eq!(h.mask_bytes()[..5], [255, 255, 255, 255, 0]);
        let v6 = Cidr::parse("::1/128").unwrap();
        assert!(v6.contains("::1".parse().unwrap()));
        assert!(!v6.contains("127.0.0.1".parse().unwrap()));
    }

    #[test]
    fn odd_prefix_mask() {
        let c = Cidr::parse("192.168.0.0/20").unwrap();
        assert_eq!(c.mask_bytes()[..4], [255, 255, 240, 0]);
        assert!(c.contains("192.168.15.255".parse().unwrap()));
        assert!(!c.contains("192.168.16.0".parse().unwrap()));
    }

    #[test]
    fn refuses_bad_input() {
        for bad in [
            "",
            "1.2.3",
            "1.2.3.4/33",
            "::1/129",
            "10.1.2.3/8",
            "x/8",
            "1.2.3.4/-1",
        ] {
            assert!(Cidr::parse(bad).is_err(), "{bad} accepted");
        }
    }
}
