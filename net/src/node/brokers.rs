//! The broker directory: every broker's client endpoints as this node knows them, so any node
//! answers Metadata and DescribeCluster (docs/protocol.md, "Client endpoints"). Not consensus
//! state: it rides FetchQuorumRecords tagged fields the node adds around the core's messages.
//!
//! A fetcher sends its own endpoints until the list it holds shows them; the leader keeps the
//! endpoints of each replica it has heard fetch (the voters, and the live observers the core
//! tracks) and answers a fetcher that holds another version of the list with the whole list. A
//! follower replaces its list with each one it receives; a new leader starts from the list it
//! held (so a dead voter stays listed, with its last endpoints).

use std::collections::BTreeMap;

use bytes::Bytes;
use engine::raft::{Epoch, NodeId, ReplicaView, Sender};

use crate::wire::broker_list::{BrokerInfo, BrokerList, ClientEndpoint, MAX_BROKERS};
use crate::wire::kafka::ClusterBroker;
use crate::wire::quorum::FetchRequestExtras;

/// Other brokers' entries kept at most: a list must hold them and this node.
const MAX_OTHERS: usize = MAX_BROKERS - 1;

/// Whether a fetch's endpoints may be kept as replica `replica`'s: its sender is proven to be
/// that replica (a certificate or SASL principal mapped to it), or it came on a PLAINTEXT
/// listener, where nothing is proven for anyone (as for every quorum RPC there).
pub(crate) fn vouches_for(sender: Sender, replica: NodeId, plaintext_listener: bool) -> bool {
    match sender {
        Sender::Replica(id) => id == replica,
        Sender::Unverified => plaintext_listener,
        Sender::NotAReplica => false,
    }
}

pub(crate) struct BrokerDirectory {
    own_id: NodeId,
    /// This node's advertised client endpoints: its configuration is the truth about itself.
    own: Vec<ClientEndpoint>,
    others: BTreeMap<NodeId, Vec<ClientEndpoint>>,
    /// The last list received from a leader.
    held: Option<Held>,
    /// The list as this node last built it while leading; None once `others` changed.
    built: Option<Built>,
}

struct Held {
    version: u64,
    /// The leader that sent or confirmed it, and in which epoch.
    from: NodeId,
    epoch: Epoch,
    in_sync: Vec<NodeId>,
    /// Whether it lists this node with its endpoints as they are (then it stops sending them).
    shows_own: bool,
}

struct Built {
    in_sync: Vec<NodeId>,
    version: u64,
    bytes: Bytes,
}

impl BrokerDirectory {
    pub(crate) fn new(own_id: NodeId, own: Vec<ClientEndpoint>) -> Self {
        Self {
            own_id,
            own,
            others: BTreeMap::new(),
            held: None,
            built: None,
        }
    }

    /// What this node adds to its next FetchQuorumRecords request: its endpoints while the
    /// list it holds does not show them, and the version it holds (0: none).
    pub(crate) fn fetch_extras(&self) -> FetchRequestExtras {
        let shown = self.held.as_ref().is_some_and(|h| h.shows_own);
        FetchRequestExtras {
            endpoints: (!shown).then(|| self.own.clone()),
            known_brokers: Some(self.held.as_ref().map_or(0, |h| h.version)),
            producer_ids: None,
        }
    }

    /// On the leader: a replica's endpoints from a fetch it answered, whose sender may speak for
    /// that replica. Kept for voters and for observers the core tracks; at most [`MAX_OTHERS`].
    pub(crate) fn learn(
        &mut self,
        replica: NodeId,
        endpoints: &[ClientEndpoint],
        voters: &[NodeId],
        view: &ReplicaView,
    ) {
        let voter = voters.contains(&replica);
        if replica == self.own_id || !(voter || view.observers.contains(&replica)) {
            return;
        }
        // Every fetch carries them: copied only when they changed.
        if self
            .others
            .get(&replica)
            .is_some_and(|known| known[..] == *endpoints)
        {
            return;
        }
        if !self.others.contains_key(&replica) && self.others.len() >= MAX_OTHERS {
            self.forget_gone_observers(voters, view);
            if self.others.len() >= MAX_OTHERS {
                return;
            }
        }
        self.others.insert(replica, endpoints.to_vec());
        self.built = None;
    }

    fn forget_gone_observers(&mut self, voters: &[NodeId], view: &ReplicaView) {
        let before = self.others.len();
        self.others
            .retain(|id, _| voters.contains(id) || view.observers.contains(id));
        if self.others.len() != before {
            self.built = None;
        }
    }

    /// On the leader: the list to send (its version and bytes), built again only when an entry
    /// or the in-sync set changed. Observers the core no longer tracks are dropped first.
    pub(crate) fn leader_list(&mut self, voters: &[NodeId], view: &ReplicaView) -> (u64, Bytes) {
        self.forget_gone_observers(voters, view);
        if let Some(built) = &self.built {
            if built.in_sync == view.in_sync {
                return (built.version, built.bytes.clone());
            }
        }
        let mut brokers: Vec<BrokerInfo> = self
            .others
            .iter()
            .map(|(id, endpoints)| BrokerInfo {
                id: *id,
                endpoints: endpoints.clone(),
            })
            .collect();
        brokers.push(BrokerInfo {
            id: self.own_id,
            endpoints: self.own.clone(),
        });
        brokers.sort_by_key(|b| b.id);
        let (list, bytes) = BrokerList::build(brokers, view.in_sync.clone());
        self.built = Some(Built {
            in_sync: view.in_sync.clone(),
            version: list.version,
            bytes: bytes.clone(),
        });
        (list.version, bytes)
    }

    /// On a fetcher: the list leader `from` sent in `epoch` replaces what it knew of the others.
    pub(crate) fn adopt(&mut self, from: NodeId, epoch: Epoch, list: BrokerList) {
        let mut shows_own = false;
        self.others.clear();
        for broker in list.brokers {
            if broker.id == self.own_id {
                shows_own = broker.endpoints == self.own;
            } else if self.others.len() < MAX_OTHERS {
                self.others.insert(broker.id, broker.endpoints);
            }
        }
        self.held = Some(Held {
            version: list.version,
            from,
            epoch,
            in_sync: list.in_sync,
            shows_own,
        });
        self.built = None;
    }

    /// On a fetcher: leader `from` answered in `epoch` without a list, so the list held is its
    /// current one.
    pub(crate) fn confirm(&mut self, from: NodeId, epoch: Epoch) {
        if let Some(held) = &mut self.held {
            held.from = from;
            held.epoch = epoch;
        }
    }

    /// The in-sync voters: the core's view on the leader; elsewhere the held list's, if the
    /// current leader sent or confirmed it in the current epoch; otherwise none are known.
    pub(crate) fn in_sync(
        &self,
        leader: Option<NodeId>,
        epoch: Epoch,
        view: Option<&ReplicaView>,
    ) -> Vec<NodeId> {
        if let Some(view) = view {
            return view.in_sync.clone();
        }
        match &self.held {
            Some(h) if Some(h.from) == leader && h.epoch == epoch => h.in_sync.clone(),
            _ => Vec::new(),
        }
    }

    /// Every known broker with its endpoint on the listener named `listener` (Kafka's rule: a
    /// client is told the endpoints of the listener it came in on), by id; a broker without
    /// such a listener is left out.
    pub(crate) fn brokers_on(&self, listener: &str) -> Vec<ClusterBroker> {
        let own = std::iter::once((&self.own_id, &self.own));
        let mut brokers: Vec<ClusterBroker> = self
            .others
            .iter()
            .chain(own)
            .filter_map(|(id, endpoints)| {
                let e = endpoints
                    .iter()
                    .find(|e| e.listener.eq_ignore_ascii_case(listener))?;
                Some(ClusterBroker {
                    node_id: *id,
                    host: e.host.clone(),
                    port: i32::from(e.port),
                    rack: None,
                })
            })
            .collect();
        brokers.sort_by_key(|b| b.node_id);
        brokers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoints(port: u16) -> Vec<ClientEndpoint> {
        vec![ClientEndpoint {
            listener: "CLIENT".into(),
            host: "127.0.0.1".into(),
            port,
        }]
    }

    fn view(in_sync: &[NodeId], observers: &[NodeId]) -> ReplicaView {
        ReplicaView {
            in_sync: in_sync.to_vec(),
            observers: observers.to_vec(),
        }
    }

    const VOTERS: &[NodeId] = &[1, 2, 3];

    #[test]
    fn only_the_replica_itself_or_a_plaintext_listener_vouches_for_endpoints() {
        assert!(vouches_for(Sender::Replica(2), 2, false));
        assert!(
            !vouches_for(Sender::Replica(3), 2, false),
            "replica 3 posing as 2"
        );
        assert!(!vouches_for(Sender::Replica(3), 2, true));
        assert!(vouches_for(Sender::Unverified, 2, true));
        assert!(
            !vouches_for(Sender::Unverified, 2, false),
            "unproven on a TLS listener"
        );
        assert!(
            !vouches_for(Sender::NotAReplica, 2, true),
            "an operator's tool"
        );
    }

    #[test]
    fn a_follower_learns_the_leaders_list_and_stops_sending_its_endpoints() {
        let mut leader = BrokerDirectory::new(1, endpoints(9001));
        let mut follower = BrokerDirectory::new(2, endpoints(9002));
        let extras = follower.fetch_extras();
        assert_eq!(extras.endpoints, Some(endpoints(9002)));
        assert_eq!(extras.known_brokers, Some(0));

        let v = view(&[1, 2], &[]);
        leader.learn(2, &extras.endpoints.unwrap(), VOTERS, &v);
        let (version, bytes) = leader.leader_list(VOTERS, &v);
        assert_ne!(
            Some(version),
            extras.known_brokers,
            "so the leader sends it"
        );
        follower.adopt(1, 5, BrokerList::decode(bytes).unwrap());

        let extras = follower.fetch_extras();
        assert_eq!(extras.endpoints, None, "the list shows them");
        assert_eq!(extras.known_brokers, Some(version));
        let ports: Vec<(i32, i32)> = follower
            .brokers_on("client")
            .iter()
            .map(|b| (b.node_id, b.port))
            .collect();
        assert_eq!(ports, vec![(1, 9001), (2, 9002)]);
        assert!(follower.brokers_on("OTHER").is_empty());
        assert_eq!(follower.in_sync(Some(1), 5, None), vec![1, 2]);
        assert!(
            follower.in_sync(Some(3), 6, None).is_empty(),
            "another leader's view is not this one's"
        );
        follower.confirm(3, 6);
        assert_eq!(follower.in_sync(Some(3), 6, None), vec![1, 2]);
    }

    #[test]
    fn the_leaders_list_is_rebuilt_only_when_it_changed() {
        let mut leader = BrokerDirectory::new(1, endpoints(9001));
        let v = view(&[1], &[9]);
        let (first, _) = leader.leader_list(VOTERS, &v);
        assert_eq!(leader.leader_list(VOTERS, &v).0, first);
        leader.learn(9, &endpoints(9009), VOTERS, &v);
        let (second, _) = leader.leader_list(VOTERS, &v);
        assert_ne!(second, first);
        // The same endpoints again change nothing; a new in-sync set does.
        leader.learn(9, &endpoints(9009), VOTERS, &v);
        assert_eq!(leader.leader_list(VOTERS, &v).0, second);
        assert_ne!(leader.leader_list(VOTERS, &view(&[1, 2], &[9])).0, second);
        // Observer 9 expires from the core's view: it leaves the list.
        leader.leader_list(VOTERS, &view(&[1], &[]));
        assert_eq!(leader.brokers_on("CLIENT").len(), 1);
    }

    #[test]
    fn unknown_replicas_are_not_kept_and_the_entries_are_bounded() {
        let mut leader = BrokerDirectory::new(1, endpoints(9001));
        leader.learn(42, &endpoints(1), VOTERS, &view(&[1], &[]));
        leader.learn(1, &endpoints(1), VOTERS, &view(&[1], &[]));
        assert_eq!(leader.brokers_on("CLIENT").len(), 1, "only itself");

        let observers: Vec<NodeId> = (100..100 + MAX_OTHERS as NodeId + 10).collect();
        let v = view(&[1], &observers);
        for id in &observers {
            leader.learn(*id, &endpoints(1), VOTERS, &v);
        }
        assert_eq!(leader.others.len(), MAX_OTHERS);
        // A voter still gets in once an observer the core forgot makes room.
        let fewer = view(&[1], &observers[1..]);
        leader.learn(2, &endpoints(9002), VOTERS, &fewer);
        assert!(leader.others.contains_key(&2));
        assert!(leader.others.len() <= MAX_OTHERS);
    }
}
