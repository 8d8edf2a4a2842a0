//! JSON-RPC messages: telling requests, notifications and responses apart in a body, and the
//! messages the server writes.

use serde_json::{json, Map, Value};

pub const PARSE_ERROR: i32 = -32700;
pub const INVALID_REQUEST: i32 = -32600;
pub const METHOD_NOT_FOUND: i32 = -32601;
pub const INVALID_PARAMS: i32 = -32602;
pub const SERVER_NOT_INITIALIZED: i32 = -32002;
pub const REQUEST_CANCELLED: i32 = -32800;

/// A request from the client. Its id is kept as sent (a number or a string).
#[derive(Debug, Clone)]
pub struct Request {
    pub id: Value,
    pub method: String,
    pub params: Value,
}

/// A notification from the client.
#[derive(Debug, Clone)]
pub struct Notification {
    pub method: String,
    pub params: Value,
}

/// A message from the client.
#[derive(Debug)]
pub enum Incoming {
    Request(Request),
    Notification(Notification),
    /// A response to a request the server sent (`workspace/applyEdit`).
    Response,
    /// Not a valid message: answer with this error when `id` is known (`Some(Value::Null)`
    /// for a parse error, as JSON-RPC asks), else only log it.
    Invalid {
        id: Option<Value>,
        code: i32,
        message: String,
    },
}

fn invalid(id: Option<Value>, code: i32, message: impl Into<String>) -> Incoming {
    Incoming::Invalid {
        id,
        code,
        message: message.into(),
    }
}

/// Reads a message body.
pub fn parse(body: &[u8]) -> Incoming {
    let value: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return invalid(Some(Value::Null), PARSE_ERROR, format!("invalid JSON: {e}")),
    };
    let Value::Object(map) = &value else {
        return invalid(
            Some(Value::Null),
            INVALID_REQUEST,
            "a message must be a JSON object",
        );
    };
    // an id the server can answer to: a number or a string
    let id = map
        .get("id")
        .filter(|i| i.is_number() || i.is_string())
        .cloned();
    if let Some(method) = map.get("method") {
        let Some(method) = method.as_str().map(str::to_string) else {
            return invalid(
                map.get("id").map(|_| id.unwrap_or(Value::Null)),
                INVALID_REQUEST,
                "the method must be a string",
            );
        };
        let Some(params) = params(map) else {
            return invalid(
                map.get("id").map(|_| id.unwrap_or(Value::Null)),
                INVALID_REQUEST,
                "params must be an object or an array",
            );
        };
        if !map.contains_key("id") {
            return Incoming::Notification(Notification { method, params });
        }
        let Some(id) = id else {
            return invalid(
                Some(Value::Null),
                INVALID_REQUEST,
                "a request id must be a number or a string",
            );
        };
        return Incoming::Request(Request { id, method, params });
    }
    if map.contains_key("result") || map.contains_key("error") {
        return Incoming::Response;
    }
    invalid(
        id.or(Some(Value::Null)),
        INVALID_REQUEST,
        "a message needs a method (request, notification) or a result (response)",
    )
}

/// The params of a message: absent and `null` are the same.
fn params(map: &Map<String, Value>) -> Option<Value> {
    match map.get("params") {
        None | Some(Value::Null) => Some(Value::Null),
        Some(p @ (Value::Object(_) | Value::Array(_))) => Some(p.clone()),
        Some(_) => None,
    }
}

/// A successful response.
pub fn ok(id: &Value, result: Value) -> Value {
    json!({ "id": id, "result": result })
}

/// An error response.
pub fn error(id: &Value, code: i32, message: &str) -> Value {
    json!({ "id": id, "error": { "code": code, "message": message } })
}

pub fn notification(method: &str, params: Value) -> Value {
    json!({ "method": method, "params": params })
}

/// A `window/logMessage` notification (1 error, 2 warning, 3 info, 4 log).
pub fn log(kind: u8, message: &str) -> Value {
    notification(
        "window/logMessage",
        json!({ "type": kind, "message": message }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(body: &str) -> (Option<Value>, i32) {
        match parse(body.as_bytes()) {
            Incoming::Invalid { id, code, .. } => (id, code),
            other => panic!("{body}: {other:?}"),
        }
    }

    #[test]
    fn tells_messages_apart() {
        let r = parse(br#"{"jsonrpc":"2.0","id":"a","method":"x","params":{}}"#);
        assert!(matches!(r, Incoming::Request(r) if r.method == "x" && r.id == "a"));
        // any number is an id, however large
        let big = parse(br#"{"id":1099511627776,"method":"x"}"#);
        assert!(matches!(big, Incoming::Request(r) if r.id == json!(1099511627776u64)));
        let n = parse(br#"{"jsonrpc":"2.0","method":"y"}"#);
        assert!(matches!(n, Incoming::Notification(n) if n.method == "y"));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":3,"result":null}"#),
            Incoming::Response
        ));
    }

    #[test]
    fn malformed_messages_get_the_right_error() {
        assert_eq!(code("{"), (Some(Value::Null), PARSE_ERROR));
        assert_eq!(code("[1]"), (Some(Value::Null), INVALID_REQUEST));
        assert_eq!(
            code(r#"{"id":7,"method":5}"#),
            (Some(json!(7)), INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"id":"k","method":"x","params":3}"#),
            (Some(json!("k")), INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"id":[1],"method":"x"}"#),
            (Some(Value::Null), INVALID_REQUEST)
        );
        assert_eq!(code(r#"{"method":["x"]}"#), (None, INVALID_REQUEST));
        assert_eq!(code(r#"{"id":9}"#), (Some(json!(9)), INVALID_REQUEST));
    }
}
