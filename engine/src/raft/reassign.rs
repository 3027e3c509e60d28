//! AlterQuorum on the leader and the reassignment it drives (docs/protocol.md, "AlterQuorum
//! and reassignment").

use super::core::RaftCore;
use super::types::{Output, RequestId};
use super::{AlterQuorumRequest, AlterQuorumResponse, ErrorCode, Response};

impl RaftCore {
    pub(crate) fn handle_alter_quorum(
        &mut self,
        id: RequestId,
        request: AlterQuorumRequest,
        out: &mut Vec<Output>,
    ) {
        if request.cluster_id != self.config.cluster_id {
            let why = format!("cluster id {:?} is not this cluster's", request.cluster_id);
            return self.respond_alter_quorum_error(
                id,
                ErrorCode::INCONSISTENT_CLUSTER_ID,
                Some(why),
                out,
            );
        }
        if self.qs.leader().is_none() {
            return self.respond_alter_quorum_error(id, ErrorCode::NOT_QUORUM_LEADER, None, out);
        }
        let why = "reassignment is not implemented yet".to_string();
        self.respond_alter_quorum_error(id, ErrorCode::INVALID_REQUEST, Some(why), out)
    }

    /// An AlterQuorum answer with no per-voter results: the leader hint and this node's epoch,
    /// so a client sent to the wrong node can go on to the leader.
    pub(crate) fn respond_alter_quorum_error(
        &self,
        id: RequestId,
        error: ErrorCode,
        error_message: Option<String>,
        out: &mut Vec<Output>,
    ) {
        out.push(Output::Respond {
            id,
            response: Response::AlterQuorum(AlterQuorumResponse {
                error,
                error_message,
                leader_id: self.leader_hint(),
                leader_epoch: self.qs.epoch(),
                target_voters: Vec::new(),
            }),
        });
    }
}
