//! What the server sends that the model may read, checked as the server's output before the
//! client sees it (`call/output`: credentials and secrets redacted, untrusted text fenced and
//! remembered for the echo check, the session's untrusted leg set): tool results, direct or
//! through a task (`tasks/result`), the texts of resources, prompts, task statuses
//! (`tasks/get`, `tasks/list`, `notifications/tasks/status`) and sampling requests; and the
//! server's elicitation requests, decided before the client sees them, also when a
//! 2026-07-28 result embeds them (`inputRequests`).
use std::sync::Arc;

use serde_json::{Value, json};

use super::{
    checks,
    jsonrpc::{self, code},
    proxy::Router,
    tools,
};
use crate::protocol::CallOutput;
use gatewayd_core::audit::Decision;

impl Router {
    /// A `tools/call` answer: reported to the gateway, passed on redacted (and fenced). An
    /// answer that is a task (`CreateTaskResult`) is remembered, so its result
    /// (`tasks/result`) is checked as this tool's; its status text is checked now.
    pub(super) async fn called(self: Arc<Self>, id: Value, mut v: Value, tool: String) {
        if self.refuse_embedded(&id, &mut v).await {
            return;
        }
        if v.pointer("/result/resultType") == Some(&json!("input_required")) {
            // No output yet: the client answers the requests and calls again.
            return self.send_client(v.to_string()).await;
        }
        if let Some(task) = v.pointer("/result/task/taskId").and_then(Value::as_str)
            && v.pointer("/result/content").is_none()
        {
            self.lock().tasks.insert(task.to_owned(), tool.clone());
            let label = self.label("tasks");
            return self.texts_checked(id, v, label).await;
        }
        // Binary items (images, audio, blobs) are not the gateway's to read: kept aside, put
        // back as they came.
        let binary = v
            .get_mut("result")
            .map(tools::take_binary)
            .unwrap_or_default();
        let result = match v.get("error") {
            Some(e) => Err(e["message"].as_str().unwrap_or("").to_owned()),
            None => Ok(tools::output_payload(&v["result"])),
        };
        let report = CallOutput::of(&self.session, &tool, result);
        match self.backend.request(report).await {
            Ok(answer) => {
                if let Some(e) = v.get_mut("error") {
                    e["message"] = json!(answer.error.as_deref().unwrap_or(""));
                    e.as_object_mut().map(|o| o.remove("data"));
                } else if let Some(r) = v.get_mut("result") {
                    tools::apply_output(r, &answer);
                    tools::put_binary(r, binary);
                }
                self.send_client(v.to_string()).await;
            }
            Err(e) => self.withheld(&id, &e.to_string()).await,
        }
    }

    /// A `tasks/result` answer: the result of a task a `tools/call` made is checked as that
    /// tool's result; any other task's, text by text as the server's output.
    pub(super) async fn task_result(self: Arc<Self>, id: Value, v: Value, task: String) {
        let tool = self.lock().tasks.get(&task).cloned();
        if let Some(tool) = tool {
            self.called(id, v, tool).await;
        } else {
            let label = self.label("tasks/result");
            self.texts_checked(id, v, label).await;
        }
    }

    /// Checks every text of `v` as output of `label` (`call/output`), in place.
    async fn check_texts(&self, v: &mut Value, label: &str) -> Result<(), String> {
        for slot in checks::text_slots(v) {
            let Some(text) = v.pointer(&slot).and_then(Value::as_str) else {
                continue;
            };
            let report = CallOutput::of(&self.session, label, Ok(Value::String(text.to_owned())));
            let answer = self
                .backend
                .request(report)
                .await
                .map_err(|e| e.to_string())?;
            let checked = match answer.output {
                Some(Value::String(t)) => t,
                _ => "[gatewayd: the server's text was withheld]".to_owned(),
            };
            if let Some(x) = v.pointer_mut(&slot) {
                *x = Value::String(checked);
            }
        }
        Ok(())
    }

    /// An answer (or, with a null `id`, a notification) whose texts are the server's output:
    /// checked, then passed on; withheld when the gateway cannot check them.
    pub(super) async fn texts_checked(self: Arc<Self>, id: Value, mut v: Value, label: String) {
        if self.refuse_embedded(&id, &mut v).await {
            return;
        }
        match self.check_texts(&mut v, &label).await {
            Ok(()) => self.send_client(v.to_string()).await,
            Err(e) if id.is_null() => {
                eprintln!(
                    "gatewayd mcp: a notification from the server was withheld: the gateway could not check it ({e})"
                );
            }
            Err(e) => self.withheld(&id, &e).await,
        }
    }

    async fn withheld(&self, id: &Value, why: &str) {
        let m = format!(
            "the server answered, but the gateway could not check its output ({why}); it is withheld"
        );
        self.send_client(jsonrpc::error_response(id, code::GATEWAY_UNAVAILABLE, &m))
            .await;
    }

    /// The server's `elicitation/create` and `sampling/createMessage` requests
    /// ([`Router::decide_request`]): refused to the server, or passed on.
    pub(super) async fn server_request(self: Arc<Self>, id: Value, mut v: Value) {
        match self.decide_request(&mut v).await {
            None => self.send_client(v.to_string()).await,
            Some((c, m)) => {
                self.lock().server_requests.remove(&jsonrpc::id_key(&id));
                self.send_server(jsonrpc::error_response(&id, c, &m)).await;
            }
        }
    }

    /// A request of the server's to the client (`{method, params}`, sent on its own or
    /// embedded in a 2026-07-28 `inputRequests`): an `elicitation/create` decided and
    /// recorded; a `sampling/createMessage` has its texts checked as untrusted output
    /// (fenced, the session's untrusted leg set), in place, and is recorded. Others pass.
    /// A refusal: the error code and message to answer with.
    async fn decide_request(&self, req: &mut Value) -> Option<(i64, String)> {
        let method = req["method"].as_str().unwrap_or("").to_owned();
        if method == "elicitation/create" {
            let decided = checks::elicitation(&req["params"], &self.egress);
            let mode = req
                .pointer("/params/mode")
                .and_then(Value::as_str)
                .unwrap_or("form");
            let detail = json!({"mode": mode, "url": req.pointer("/params/url")});
            return self
                .record_decision(&method, &decided, detail)
                .await
                .map(|m| (code::REFUSED, m));
        }
        if method != "sampling/createMessage" {
            return None;
        }
        let label = self.label(&method);
        if let Err(e) = self.check_texts(req, &label).await {
            let m = format!(
                "gatewayd could not check this sampling request ({e}); it was not passed on"
            );
            eprintln!("gatewayd mcp: {m}");
            return Some((code::GATEWAY_UNAVAILABLE, m));
        }
        self.record(
            Decision::Info,
            "sampling_untrusted",
            json!({"server": self.server, "method": method,
                   "message": "the server's sampling request was passed on with its texts fenced as untrusted input; the session's untrusted leg is set"}),
        )
        .await;
        None
    }

    /// The requests a 2026-07-28 `input_required` result embeds (`inputRequests`), each
    /// decided as if the server had sent it; the first refusal refuses the whole answer.
    async fn embedded_requests(&self, v: &mut Value) -> Option<(i64, String)> {
        let reqs = v
            .pointer_mut("/result/inputRequests")
            .and_then(Value::as_object_mut)?;
        for req in reqs.values_mut() {
            if let Some(refused) = self.decide_request(req).await {
                return Some(refused);
            }
        }
        None
    }

    /// An answer embedding a request the gateway refused: the client gets the refusal.
    async fn refuse_embedded(&self, id: &Value, v: &mut Value) -> bool {
        match self.embedded_requests(v).await {
            None => false,
            Some((c, m)) => {
                self.send_client(jsonrpc::error_response(id, c, &m)).await;
                true
            }
        }
    }
}
