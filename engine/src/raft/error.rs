//! Every error code the quorum uses, in one table (docs/protocol.md section 1, "Error codes").
//!
//! Kafka's numbers where Kafka has the error; the draft's private ones (205-208) where it does not.

/// A Kafka protocol error code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ErrorCode(pub i16);

macro_rules! error_codes {
    ($($name:ident = $code:expr, $text:expr;)*) => {
        impl ErrorCode {
            $(pub const $name: ErrorCode = ErrorCode($code);)*

            /// The Kafka name of the code, or None for a code this table does not know.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($code => Some(stringify!($name)),)*
                    _ => None,
                }
            }

            /// A sentence for operators.
            pub fn description(self) -> &'static str {
                match self.0 {
                    $($code => $text,)*
                    _ => "unknown error code",
                }
            }
        }
    };
}

error_codes! {
    UNKNOWN_SERVER_ERROR = -1, "unexpected server error";
    NONE = 0, "no error";
    OFFSET_OUT_OF_RANGE = 1, "fetch offset out of range";
    CORRUPT_MESSAGE = 2, "record batch failed its CRC or size check";
    UNKNOWN_TOPIC_OR_PARTITION = 3, "this server does not host that topic-partition";
    LEADER_NOT_AVAILABLE = 5, "the partition has no leader (an election is under way)";
    NOT_LEADER_OR_FOLLOWER = 6, "this server is not the leader";
    REQUEST_TIMED_OUT = 7, "the request timed out";
    BROKER_NOT_AVAILABLE = 8, "the server is shutting down or resigned; retry elsewhere";
    OFFSET_METADATA_TOO_LARGE = 12, "the committed offset's metadata is too large";
    COORDINATOR_LOAD_IN_PROGRESS = 14, "this node's producer ids or group offsets are not ready yet; retry";
    COORDINATOR_NOT_AVAILABLE = 15, "no producer ids or group coordinator here now; retry";
    NOT_COORDINATOR = 16, "this node is not the group coordinator (the Raft leader); find it again";
    ILLEGAL_GENERATION = 22, "the member's group generation is not the group's";
    INCONSISTENT_GROUP_PROTOCOL = 23, "the member's protocol type or protocols do not match the group's";
    INVALID_GROUP_ID = 24, "the group id is empty or too long";
    UNKNOWN_MEMBER_ID = 25, "the group has no member with that id";
    INVALID_SESSION_TIMEOUT = 26, "the session timeout is outside the coordinator's bounds";
    REBALANCE_IN_PROGRESS = 27, "the group is rebalancing; rejoin";
    TOPIC_AUTHORIZATION_FAILED = 29, "topic authorization failed";
    GROUP_AUTHORIZATION_FAILED = 30, "group authorization failed";
    CLUSTER_AUTHORIZATION_FAILED = 31, "cluster authorization failed";
    UNSUPPORTED_SASL_MECHANISM = 33, "the SASL mechanism is not enabled on this listener";
    ILLEGAL_SASL_STATE = 34, "the SASL request is not expected now";
    UNSUPPORTED_VERSION = 35, "unsupported api version";
    INVALID_REQUEST = 42, "malformed request";
    NON_EMPTY_GROUP = 68, "the group has members";
    GROUP_ID_NOT_FOUND = 69, "the group does not exist";
    MEMBER_ID_REQUIRED = 79, "join again with the member id this answer hands out";
    GROUP_MAX_SIZE_REACHED = 81, "the group has as many members as it may";
    FENCED_INSTANCE_ID = 82, "another member took this group instance id";
    GROUP_SUBSCRIBED_TO_TOPIC = 86, "the group has members consuming the topic";
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45, "the producer's batch does not follow its previous one (a gap, or a new epoch not at 0)";
    INVALID_PRODUCER_EPOCH = 47, "the producer's epoch is older than the one in the log (fenced)";
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53, "transactional id authorization failed";
    KAFKA_STORAGE_ERROR = 56, "this node's log directory cannot take more data (disk full); retry";
    SASL_AUTHENTICATION_FAILED = 58, "SASL authentication failed";
    FENCED_LEADER_EPOCH = 74, "the request's epoch is older than the receiver's";
    UNKNOWN_LEADER_EPOCH = 75, "the request's epoch is newer than the leader's";
    INVALID_RECORD = 87, "a record batch's records are invalid (after decompression)";
    INCONSISTENT_VOTER_SET = 94, "sender or receiver is not in the receiver's voter set";
    INCONSISTENT_CLUSTER_ID = 104, "the request's cluster id does not match this cluster";
    UNSUPPORTED_ENDPOINT_TYPE = 115, "the requested endpoint type is not served";
    INVALID_VOTER_KEY = 125, "the voter's directory id does not match the voter set's";
    NOT_QUORUM_LEADER = 205, "target broker is not the leader of this quorum";
    UNKNOWN_VOTER_ID = 206, "target voter is unknown to the leader";
    NOT_FOLLOWER = 207, "the sender is no longer a voter; continue as an observer";
    INVALID_QUORUM_STATE = 208, "the request conflicts with the known quorum state";
}

impl ErrorCode {
    pub fn is_none(self) -> bool {
        self == ErrorCode::NONE
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name} ({})", self.0),
            None => write!(f, "error code {}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorCode;

    #[test]
    fn codes_match_protocol_table() {
        assert_eq!(ErrorCode::FENCED_LEADER_EPOCH.0, 74);
        assert_eq!(ErrorCode::INCONSISTENT_VOTER_SET.0, 94);
        assert_eq!(ErrorCode::INCONSISTENT_CLUSTER_ID.0, 104);
        assert_eq!(
            ErrorCode::NOT_QUORUM_LEADER.name(),
            Some("NOT_QUORUM_LEADER")
        );
        assert_eq!(ErrorCode(9999).name(), None);
        assert_eq!(ErrorCode::NOT_FOLLOWER.to_string(), "NOT_FOLLOWER (207)");
    }
}
