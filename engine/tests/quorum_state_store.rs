//! The quorum-state file on a real filesystem (tempfile under /tmp, ext4 here).

use std::fs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use engine::base::sealed_line;
use engine::quorum_state_store::{
    CopyFault, QuorumStateError, QuorumStateStore, COPY_B_FILE_NAME, FILE_NAME, TEMP_FILE_NAME,
};
use engine::raft::ElectionState;

fn state(epoch: i32, voted_id: i32, target: Option<Vec<i32>>) -> ElectionState {
    ElectionState {
        epoch,
        leader_id: -1,
        voted_id,
        current_voters: vec![1, 2, 3],
        target_voters: target,
        target_force: false,
        applied_offset: 40 + i64::from(epoch),
        ..Default::default()
    }
}

#[test]
fn missing_file_reads_as_none() {
    let dir = tempfile::tempdir().unwrap();
    let file = QuorumStateStore::open(dir.path(), 1, "cluster").unwrap();
    assert_eq!(file.read().unwrap(), None);
}

#[test]
fn written_state_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut file = QuorumStateStore::open(dir.path(), 1, "cluster").unwrap();
    for written in [
        state(0, -1, None),
        state(3, 2, Some(vec![1, 2, 4])),
        state(4, -1, Some(vec![])),
        ElectionState {
            epoch: i32::MAX,
            leader_id: 3,
            voted_id: 3,
            current_voters: vec![],
            target_voters: None,
            target_force: false,
            applied_offset: i64::MAX,
            ..Default::default()
        },
    ] {
        file.write(&written).unwrap();
        assert_eq!(file.read().unwrap(), Some(written.clone()));
        // A fresh handle (a restart) reads the same.
        let reopened = QuorumStateStore::open(dir.path(), 1, "cluster").unwrap();
        assert_eq!(reopened.read().unwrap(), Some(written));
    }
    assert!(!dir.path().join(TEMP_FILE_NAME).exists());
}

#[test]
fn open_needs_an_existing_directory() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    assert!(matches!(
        QuorumStateStore::open(&missing, 1, "c"),
        Err(QuorumStateError::Directory { .. })
    ));
    let plain = dir.path().join("plain");
    fs::write(&plain, b"x").unwrap();
    assert!(matches!(
        QuorumStateStore::open(&plain, 1, "c"),
        Err(QuorumStateError::Directory { .. })
    ));
}

/// A crash during a write leaves the temporary file behind; the state is the old one and the
/// next open discards the leftover.
#[test]
fn unfinished_write_leaves_the_old_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut file = QuorumStateStore::open(dir.path(), 1, "c").unwrap();
    file.write(&state(1, 1, None)).unwrap();
    let temp = dir.path().join(TEMP_FILE_NAME);
    fs::write(
        &temp,
        b"{\"clusterId\":\"c\",\"nodeId\":1,\"leaderId\":-1,\"leaderE",
    )
    .unwrap();
    assert_eq!(file.read().unwrap(), Some(state(1, 1, None)));
    let reopened = QuorumStateStore::open(dir.path(), 1, "c").unwrap();
    assert!(!temp.exists());
    assert_eq!(reopened.read().unwrap(), Some(state(1, 1, None)));
}

/// rename(2) swaps the file atomically: a reader racing a writer always sees a whole state,
/// the old or the new one.
#[test]
fn concurrent_reader_never_sees_a_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = QuorumStateStore::open(dir.path(), 1, "c").unwrap();
    let states = [
        state(1, 1, None),
        state(2, 3, Some(vec![1, 2, 3, 4, 5, 6, 7])),
    ];
    writer.write(&states[0]).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    // Opened before the writes start: open discards a leftover temporary file, which would
    // race with the writer's (one handle per directory is the rule outside this test).
    let file = QuorumStateStore::open(dir.path(), 1, "c").unwrap();
    let reader = {
        let done = done.clone();
        let states = states.clone();
        std::thread::spawn(move || {
            let mut reads = 0u64;
            while !done.load(Ordering::Relaxed) || reads == 0 {
                let read = file.read().unwrap().expect("the file always exists");
                assert!(states.contains(&read), "{read:?}");
                reads += 1;
            }
            reads
        })
    };
    for round in 0..200 {
        writer.write(&states[round % 2]).unwrap();
    }
    done.store(true, Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
}

fn write_raw(dir: &std::path::Path, contents: &str) -> QuorumStateStore {
    fs::write(dir.join(FILE_NAME), contents).unwrap();
    QuorumStateStore::open(dir, 1, "c").unwrap()
}

const GOOD: &str = "{\"clusterId\":\"c\",\"nodeId\":1,\"leaderId\":2,\"leaderEpoch\":5,\"votedId\":2,\"appliedOffset\":0,\"currentVoters\":[{\"voterId\":1},{\"voterId\":2}],\"targetVoters\":null,\"data_version\":0}\n";

#[test]
fn hand_written_file_in_the_documented_format_reads() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_raw(dir.path(), GOOD);
    assert_eq!(
        file.read().unwrap(),
        Some(ElectionState {
            epoch: 5,
            leader_id: 2,
            voted_id: 2,
            current_voters: vec![1, 2],
            target_voters: None,
            target_force: false,
            applied_offset: 0,
            ..Default::default()
        })
    );
}

/// Copy A's fault, when the read found no usable copy and no copy B (an earlier build's
/// single file that cannot be read).
fn lone_copy_fault(file: &QuorumStateStore) -> CopyFault {
    match file.read() {
        Err(QuorumStateError::NoUsableCopy {
            a,
            a_fault,
            b_fault,
            ..
        }) => {
            assert_eq!(a, file.path());
            assert_eq!(b_fault, CopyFault::Missing);
            a_fault
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_truncation_of_an_earlier_builds_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for len in 0..GOOD.len() {
        let file = write_raw(dir.path(), &GOOD[..len]);
        let error = file.read().unwrap_err();
        assert!(
            matches!(error, QuorumStateError::NoUsableCopy { .. }),
            "len {len}: {error}"
        );
        assert!(error.to_string().contains(FILE_NAME), "{error}");
        assert!(error.to_string().contains(COPY_B_FILE_NAME), "{error}");
    }
}

#[test]
fn corrupt_files_are_errors_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("garbage\n", "expected value"),
        ("\n", "EOF"),
        (
            &GOOD.replace("\"leaderEpoch\":5", "\"leaderEpoch\":-5"),
            "negative leaderEpoch",
        ),
        (
            &GOOD.replace("\"votedId\":2", "\"votedId\":-7"),
            "votedId -7",
        ),
        (
            &GOOD.replace("\"votedId\":2", "\"votedId\":\"2\""),
            "invalid type",
        ),
        (
            &GOOD.replace("\"votedId\":2,", ""),
            "missing field `votedId`",
        ),
        (
            &GOOD.replace("\"currentVoters\"", "\"currentVoterz\""),
            "unknown field",
        ),
        (
            &GOOD.replace("{\"voterId\":1}", "{\"voterId\":1,\"x\":0}"),
            "unknown field",
        ),
        (
            &GOOD.replace(
                "\"currentVoters\":[{\"voterId\":1},{\"voterId\":2}]",
                "\"currentVoters\":null",
            ),
            "invalid type: null",
        ),
        (&GOOD.replace(",\"data_version\":0", ""), "no data_version"),
        (&GOOD.replace("\n", "\n{}\n"), "more than one line"),
        (&GOOD.replace("\n", " {}\n"), "trailing characters"),
    ];
    for (contents, reason) in cases {
        let file = write_raw(dir.path(), contents);
        match lone_copy_fault(&file) {
            CopyFault::Malformed(got) => assert!(got.contains(reason), "{contents:?}: {got}"),
            other => panic!("{contents:?}: {other:?}"),
        }
    }
    let file = write_raw(dir.path(), "");
    assert!(matches!(lone_copy_fault(&file), CopyFault::Seal(_)));
    fs::write(dir.path().join(FILE_NAME), [0xff, 0xfe, b'\n']).unwrap();
    assert_eq!(
        lone_copy_fault(&file),
        CopyFault::Malformed("not UTF-8".into())
    );
}

#[test]
fn unknown_data_version_is_its_own_error() {
    let dir = tempfile::tempdir().unwrap();
    // A newer format may change other fields too: the version is what gets reported.
    let newer = GOOD
        .replace("\"data_version\":0", "\"data_version\":5")
        .replace("\"currentVoters\":[{\"voterId\":1},{\"voterId\":2}],", "");
    let file = write_raw(dir.path(), &newer);
    match file.read() {
        Err(QuorumStateError::UnknownVersion {
            found, supported, ..
        }) => {
            assert_eq!(found, "5");
            assert_eq!(supported, 4);
        }
        other => panic!("{other:?}"),
    }
    // Left as it was: a newer build's file is never rewritten.
    assert_eq!(fs::read_to_string(file.path()).unwrap(), newer);
    assert!(!dir.path().join(COPY_B_FILE_NAME).exists());
}

#[test]
fn another_clusters_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut file = QuorumStateStore::open(dir.path(), 1, "cluster-a").unwrap();
    file.write(&state(2, 1, None)).unwrap();
    let other = QuorumStateStore::open(dir.path(), 1, "cluster-b").unwrap();
    match other.read() {
        Err(QuorumStateError::ClusterIdMismatch {
            expected, found, ..
        }) => {
            assert_eq!(expected, "cluster-b");
            assert_eq!(found, "cluster-a");
        }
        other => panic!("{other:?}"),
    }
    // Refused, not cleared: the original owner still reads its state.
    assert_eq!(file.read().unwrap(), Some(state(2, 1, None)));
}

#[test]
fn another_nodes_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut file = QuorumStateStore::open(dir.path(), 1, "c").unwrap();
    file.write(&state(2, 1, None)).unwrap();
    let other = QuorumStateStore::open(dir.path(), 2, "c").unwrap();
    let error = other.read().unwrap_err();
    assert!(
        matches!(
            error,
            QuorumStateError::NodeIdMismatch {
                expected: 2,
                found: 1,
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("broker.id"));
}

#[test]
fn an_unreadable_lone_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join(FILE_NAME)).unwrap();
    let file = QuorumStateStore::open(dir.path(), 1, "c").unwrap();
    assert!(matches!(lone_copy_fault(&file), CopyFault::Unreadable(_)));
}

#[test]
fn write_into_a_vanished_directory_is_a_write_error() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("meta");
    fs::create_dir(&sub).unwrap();
    let mut file = QuorumStateStore::open(&sub, 1, "c").unwrap();
    fs::remove_dir(&sub).unwrap();
    let error = file.write(&state(1, 1, None)).unwrap_err();
    assert!(matches!(error, QuorumStateError::Write { .. }), "{error}");
    assert!(!error.is_fail_stop());
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn election_state() -> impl Strategy<Value = ElectionState> {
        (
            0i32..=i32::MAX,
            -1i32..1000,
            -1i32..1000,
            proptest::collection::vec(0i32..1000, 0..9),
            proptest::option::of(proptest::collection::vec(0i32..1000, 0..9)),
            -1i64..=i64::MAX,
        )
            .prop_map(
                |(epoch, leader_id, voted_id, current_voters, target_voters, applied_offset)| {
                    ElectionState {
                        epoch,
                        leader_id,
                        voted_id,
                        current_voters,
                        target_force: applied_offset % 2 == 0,
                        target_voters,
                        applied_offset,
                        ..Default::default()
                    }
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn any_state_round_trips(states in proptest::collection::vec(election_state(), 1..4), cluster in "\\PC{0,20}", node in any::<i32>()) {
            let dir = tempfile::tempdir().unwrap();
            let mut file = QuorumStateStore::open(dir.path(), node, cluster.clone()).unwrap();
            for state in states {
                file.write(&state).unwrap();
                let reopened = QuorumStateStore::open(dir.path(), node, cluster.clone()).unwrap();
                prop_assert_eq!(reopened.read().unwrap(), Some(state));
            }
        }

        /// Whatever the file holds, reading it gives a state or a typed error, never a panic.
        #[test]
        fn arbitrary_contents_never_panic(contents in proptest::collection::vec(any::<u8>(), 0..200)) {
            let dir = tempfile::tempdir().unwrap();
            fs::write(dir.path().join(FILE_NAME), &contents).unwrap();
            let file = QuorumStateStore::open(dir.path(), 1, "c").unwrap();
            let _ = file.read();
        }

        /// One changed byte of one sealed copy, anywhere, to anything: the state read is the
        /// written one, and both copies hold it again after the open.
        #[test]
        fn one_changed_byte_of_one_copy_never_changes_the_state(
            written in election_state(),
            index in any::<prop::sample::Index>(),
            byte in any::<u8>(),
            in_b in any::<bool>(),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut file = QuorumStateStore::open(dir.path(), 1, "c").unwrap();
            file.write(&written).unwrap();
            let good = fs::read(file.path()).unwrap();
            let damaged = dir.path().join(if in_b { COPY_B_FILE_NAME } else { FILE_NAME });
            let mut contents = good.clone();
            let at = index.index(contents.len());
            contents[at] = byte;
            fs::write(&damaged, &contents).unwrap();
            let reopened = QuorumStateStore::open(dir.path(), 1, "c").unwrap();
            prop_assert_eq!(reopened.read().unwrap(), Some(written));
            prop_assert_eq!(fs::read(file.path()).unwrap(), good.clone());
            prop_assert_eq!(fs::read(dir.path().join(COPY_B_FILE_NAME)).unwrap(), good);
        }

        /// One changed byte of a valid file is caught or still yields a well-formed state; it
        /// never reads as another node's or cluster's state silently.
        #[test]
        fn one_changed_byte_never_reads_as_a_foreign_state(index in any::<prop::sample::Index>(), byte in any::<u8>()) {
            let dir = tempfile::tempdir().unwrap();
            let mut contents = GOOD.as_bytes().to_vec();
            let at = index.index(contents.len());
            contents[at] = byte;
            fs::write(dir.path().join(FILE_NAME), &contents).unwrap();
            let file = QuorumStateStore::open(dir.path(), 1, "c").unwrap();
            if let Ok(Some(state)) = file.read() {
                prop_assert!(state.epoch >= 0 && state.voted_id >= -1 && state.leader_id >= -1);
            }
        }
    }
}

/// A directory gets an id with its first file and keeps it across restarts; a node that comes
/// back with an empty directory gets another (docs/protocol.md, "Directory ids").
#[test]
fn a_directory_keeps_its_id_and_an_empty_one_gets_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut file = QuorumStateStore::open(dir.path(), 1, "c").unwrap();
    let id = file.directory_id();
    assert!(!id.is_zero());
    file.write(&state(1, -1, None)).unwrap();
    let text = fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
    assert!(
        text.contains(&format!("\"directoryId\":\"{id}\"")),
        "{text}"
    );
    assert!(text.contains("\"data_version\":4"), "{text}");
    let reopened = QuorumStateStore::open(dir.path(), 1, "c").unwrap();
    assert_eq!(reopened.directory_id(), id, "kept across a restart");
    assert_eq!(reopened.read().unwrap(), Some(state(1, -1, None)));
    // The disk is lost: an empty directory under the same node id.
    fs::remove_file(dir.path().join(FILE_NAME)).unwrap();
    fs::remove_file(dir.path().join(COPY_B_FILE_NAME)).unwrap();
    let wiped = QuorumStateStore::open(dir.path(), 1, "c").unwrap();
    assert!(!wiped.directory_id().is_zero());
    assert_ne!(wiped.directory_id(), id, "a new directory, a new id");
}

/// A file of an older version gets an id when opened, written back at once, so a crash before
/// the next state change cannot give the directory another id.
#[test]
fn an_older_file_gets_an_id_written_back_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_raw(dir.path(), GOOD);
    let id = file.directory_id();
    assert!(!id.is_zero());
    let text = fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
    assert!(
        text.contains(&format!("\"directoryId\":\"{id}\"")),
        "{text}"
    );
    assert_eq!(
        QuorumStateStore::open(dir.path(), 1, "c")
            .unwrap()
            .directory_id(),
        id
    );
    assert_eq!(
        file.read().unwrap().unwrap().epoch,
        5,
        "the state itself unchanged"
    );
    // A directoryId that is not one is damage, not replaced.
    let dir = tempfile::tempdir().unwrap();
    let bad = GOOD.replace(
        ",\"data_version\":0",
        ",\"directoryId\":\"nope\",\"data_version\":2",
    );
    let file = write_raw(dir.path(), &bad);
    assert!(file.directory_id().is_zero());
    assert!(matches!(lone_copy_fault(&file), CopyFault::Malformed(_)));
}

/// Bound voters carry their directory in the file (docs/protocol.md, "Voter identity"), in
/// both lists; a directory id that is not one is refused as corruption, naming the voter.
#[test]
fn bound_voters_keep_their_directories_and_a_bad_one_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let mut file = QuorumStateStore::open(dir.path(), 1, "c").unwrap();
    let d = |n: u8| engine::base::DirectoryId([n; 16]);
    let bound = ElectionState {
        voter_directories: [(1, d(1)), (3, d(3))].into(),
        target_directories: [(4, d(4))].into(),
        ..state(2, -1, Some(vec![1, 3, 4]))
    };
    file.write(&bound).unwrap();
    let text = fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
    assert!(
        text.contains(&format!(
            "{{\"voterId\":3,\"voterDirectoryId\":\"{}\"}}",
            d(3)
        )),
        "{text}"
    );
    assert!(text.contains("{\"voterId\":2}"), "an unbound voter: {text}");
    assert_eq!(file.read().unwrap(), Some(bound));
    // A bad id under a matching checksum (resealed: a writer's bug, not damage) in both copies.
    let object = sealed_line::unseal(text.as_bytes()).unwrap();
    let bad = String::from_utf8(object)
        .unwrap()
        .replace(&d(3).to_string(), "not-a-directory-id");
    let bad = sealed_line::seal(bad.as_bytes());
    fs::write(dir.path().join(COPY_B_FILE_NAME), &bad).unwrap();
    fs::write(dir.path().join(FILE_NAME), &bad).unwrap();
    let file = QuorumStateStore::open(dir.path(), 1, "c").unwrap();
    match file.read() {
        Err(QuorumStateError::NoUsableCopy {
            a_fault: CopyFault::Malformed(reason),
            ..
        }) => {
            assert!(reason.contains("voter 3"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}
