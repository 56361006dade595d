//! The trace's words for the `stateless-http` dialect (MCP 2026-07-28):
//! what a client sent and saw of a tool call's attempts, and what the
//! server's application reports of executions and of the `requestState`
//! it mints and checks.

use serde::{Deserialize, Serialize};

pub use crate::wire::mrtr::{InputAnswer, InputAsk, InputRead};

/// Why a client sent an attempt of a call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Attempt {
    /// The call's first request.
    First,
    /// A retry that answers an `InputRequiredResult` (`inputResponses`, and its `requestState`).
    Retry,
    /// The same request under a new id, after its response stream broke or went silent.
    Reissue,
    /// A request a step made: a state presented stolen, altered or again.
    Presented,
}

/// Whose `requestState` an attempt presented, and how it came by it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "how", rename_all = "kebab-case")]
pub enum StateHow {
    /// As the server handed it to this client, for this call.
    AsReceived,
    /// Another client's (`from`), for that client's call.
    Stolen {
        /// The client it was minted for.
        from: String,
    },
    /// One character changed.
    Flipped,
    /// Cut short.
    Truncated,
    /// This client's state for another call (`from_call`), on this one.
    Moved {
        /// The call it was minted for.
        from_call: String,
    },
    /// A round's state presented again after that round had completed.
    Replayed,
}

impl StateHow {
    /// Whether the server must refuse it, whoever presents it: altered or moved.
    pub fn is_tampered(&self) -> bool {
        matches!(self, StateHow::Flipped | StateHow::Truncated | StateHow::Moved { .. })
    }
}

/// The `requestState` an attempt carried.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Presented {
    /// A fingerprint of the state's text (FNV-1a, hex): the same text, the same print.
    pub fp: String,
    /// Whose it is, and how the client came by it.
    #[serde(flatten)]
    pub how: StateHow,
    /// When the client received it from the server (µs of simulated time), if it did.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub received_us: Option<u64>,
}

/// How one attempt ended, as the client saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "end", rename_all = "kebab-case")]
pub enum CallEnd {
    /// `resultType: "complete"`: the call's result.
    Complete {
        /// The result's `isError`.
        #[serde(skip_serializing_if = "std::ops::Not::not", default)]
        is_error: bool,
        /// The principal whose data the result names (its `for` field), if any.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        data_of: Option<String>,
    },
    /// `resultType: "input_required"`: the server asks for input and ends this request.
    InputRequired {
        /// The fingerprint of the `requestState` it carried, if any.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        state: Option<String>,
        /// Its `inputRequests`: each key, and the method it asks.
        #[serde(skip_serializing_if = "Vec::is_empty", default)]
        requests: Vec<InputAsk>,
    },
    /// A JSON-RPC error answered it.
    Error {
        /// Its code.
        code: i64,
        /// Its message.
        message: String,
    },
    /// An HTTP status other than 200 answered it.
    Status {
        /// The status.
        status: u16,
    },
    /// The response never completed: the stream broke, went silent, or no response came.
    Lost {
        /// Why, in words.
        why: String,
    },
    /// The response made no sense (no `resultType`, an unknown one, neither JSON nor SSE).
    Garbled {
        /// What was wrong, in words.
        what: String,
    },
}

/// A step of one execution of a tool, as the application reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "kebab-case")]
pub enum ExecStep {
    /// The execution began.
    Started,
    /// Its side effect happened (the tool's work is done, whatever the client learns of it).
    Effect,
    /// The application stopped it: the close of its response stream reached the server.
    Cancelled,
    /// Its result was handed to the transport (the client may or may not receive it).
    Completed,
}

/// What the application decided about a presented `requestState`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum StateVerdict {
    /// It acted on it.
    Accepted,
    /// It refused it, for this reason.
    Refused {
        /// Why, in the application's words.
        why: String,
    },
}
