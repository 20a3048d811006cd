//! Shell command lines parsed to argv without a shell (issue 3). Not built yet.
