//! The layout most client APIs share: an array of topics, each a name and an array of
//! partitions (Kafka's `[Name, [Partition ...], tagged fields]`), in both encodings. One reader
//! serves every such array, so each applies the bounds of `limits` the same way
//! (docs/protocol.md, "Kafka client APIs"), and each API's codec says only what one partition
//! holds.

use super::flex::Flex;
use super::limits::{read_topic_name, Budget, Entries};
use crate::wire::primitives::{WireError, WireReader, WireStr, WireWriter};

/// The smallest topic in a flexible version: a 1-byte name length, a 1-byte partition count
/// and an empty tagged-field section (the classic encoding needs more: 2 + 4 bytes).
pub(super) const MIN_TOPIC_BYTES: usize = 3;

/// A topic as a request or response names it: its name and what the message carries for each
/// of its partitions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topic<P> {
    pub name: String,
    pub partitions: Vec<P>,
}

/// How one message lays out its topic array.
#[derive(Clone, Copy, Debug)]
pub(super) struct TopicsLayout {
    /// The field names a decode error reports.
    topics: &'static str,
    partitions: &'static str,
    /// The smallest encodings of a topic and of a partition, so an array count that cannot fit
    /// in the bytes left is refused before anything is allocated.
    min_topic_bytes: usize,
    min_partition_bytes: usize,
    /// Whether each partition ends with a tagged-field section this server neither sends nor
    /// reads (written empty, skipped when read).
    partition_tags: bool,
}

impl TopicsLayout {
    /// `topics`, each with `partitions` of at least `min_partition_bytes` that end with an
    /// empty tagged-field section in flexible versions.
    pub(super) const fn new(min_partition_bytes: usize) -> Self {
        Self {
            topics: "topics",
            partitions: "partitions",
            min_topic_bytes: MIN_TOPIC_BYTES,
            min_partition_bytes,
            partition_tags: true,
        }
    }

    /// Other field names for the errors.
    pub(super) const fn named(self, topics: &'static str, partitions: &'static str) -> Self {
        Self {
            topics,
            partitions,
            ..self
        }
    }

    /// A larger smallest topic (a message that has only the classic encoding).
    pub(super) const fn min_topic_bytes(self, min_topic_bytes: usize) -> Self {
        Self {
            min_topic_bytes,
            ..self
        }
    }

    /// Partitions whose codec reads and writes their tagged fields itself, or that have none
    /// (a bare int32).
    pub(super) const fn own_partition_tags(self) -> Self {
        Self {
            partition_tags: false,
            ..self
        }
    }
}

/// Reads a topic array, spending `budget` on its topics and partitions; `read_partition` reads
/// one partition's fields.
pub(super) fn read_topics<P>(
    flex: &Flex,
    r: &mut WireReader,
    budget: &mut Budget,
    layout: &TopicsLayout,
    mut read_partition: impl FnMut(&mut WireReader) -> Result<P, WireError>,
) -> Result<Vec<Topic<P>>, WireError> {
    let mut topics = Vec::new();
    visit_topics(flex, r, budget, layout, |r, entry| {
        match entry {
            TopicEntry::Topics(count) => topics.reserve_exact(count),
            TopicEntry::Topic { name, partitions } => topics.push(Topic {
                name: name.as_str().to_owned(),
                partitions: Vec::with_capacity(partitions),
            }),
            TopicEntry::Partition => {
                let partition = read_partition(r)?;
                topics
                    .last_mut()
                    .expect("a partition follows its topic")
                    .partitions
                    .push(partition);
            }
        }
        Ok(())
    })?;
    Ok(topics)
}

/// What [`visit_topics`] has just read.
pub(super) enum TopicEntry {
    /// The array's count, first.
    Topics(usize),
    /// A topic's name (a slice of the frame) and how many partitions follow.
    Topic { name: WireStr, partitions: usize },
    /// A partition of the last topic: the visitor reads its fields.
    Partition,
}

/// Reads a topic array as [`read_topics`] does, with the same bounds, handing each entry to
/// `visit` instead of building the topics: what a server reads on every request without
/// allocating.
pub(super) fn visit_topics(
    flex: &Flex,
    r: &mut WireReader,
    budget: &mut Budget,
    layout: &TopicsLayout,
    mut visit: impl FnMut(&mut WireReader, TopicEntry) -> Result<(), WireError>,
) -> Result<(), WireError> {
    let mut read_len = |r: &mut WireReader, entries, field, min_element_bytes| {
        budget.read_len(entries, flex, r, field, min_element_bytes)
    };
    let count = read_len(r, Entries::Topics, layout.topics, layout.min_topic_bytes)?;
    visit(r, TopicEntry::Topics(count))?;
    for _ in 0..count {
        let name = read_topic_name(flex, r)?;
        let partitions = read_len(
            r,
            Entries::Partitions,
            layout.partitions,
            layout.min_partition_bytes,
        )?;
        visit(r, TopicEntry::Topic { name, partitions })?;
        for _ in 0..partitions {
            visit(r, TopicEntry::Partition)?;
            if layout.partition_tags {
                flex.read_tags(r)?;
            }
        }
        flex.read_tags(r)?;
    }
    Ok(())
}

/// Writes a topic array; `write_partition` writes one partition's fields.
pub(super) fn write_topics<P>(
    flex: &Flex,
    w: &mut WireWriter,
    layout: &TopicsLayout,
    topics: &[Topic<P>],
    mut write_partition: impl FnMut(&mut WireWriter, &P),
) {
    flex.write_array_len(w, topics.len());
    for topic in topics {
        write_topic(
            flex,
            w,
            layout,
            &topic.name,
            &topic.partitions,
            &mut write_partition,
        );
    }
}

/// Writes a topic array from partitions kept flat, each naming its topic: consecutive partitions
/// of one topic make one entry, as a client's request listed them. The bytes are those of
/// [`write_topics`] for the grouped topics, without building them (a server's answer to every
/// request: the vectors of a built response were allocations of each one).
pub(super) fn write_flat_topics<P>(
    flex: &Flex,
    w: &mut WireWriter,
    layout: &TopicsLayout,
    partitions: &[P],
    topic_of: impl Fn(&P) -> &str,
    mut write_partition: impl FnMut(&mut WireWriter, &P),
) {
    let topics = || partitions.chunk_by(|a, b| topic_of(a) == topic_of(b));
    flex.write_array_len(w, topics().count());
    for topic in topics() {
        write_topic(
            flex,
            w,
            layout,
            topic_of(&topic[0]),
            topic,
            &mut write_partition,
        );
    }
}

/// One entry of a topic array: its name, its partitions, its tagged fields.
fn write_topic<P>(
    flex: &Flex,
    w: &mut WireWriter,
    layout: &TopicsLayout,
    name: &str,
    partitions: &[P],
    write_partition: &mut impl FnMut(&mut WireWriter, &P),
) {
    flex.write_string(w, name);
    flex.write_array_len(w, partitions.len());
    for p in partitions {
        write_partition(w, p);
        if layout.partition_tags {
            flex.write_tags(w);
        }
    }
    flex.write_tags(w);
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAYOUT: TopicsLayout = TopicsLayout::new(4);

    /// A topic whose partitions are bare indexes.
    fn topic(name: &str, partitions: &[i32]) -> Topic<i32> {
        Topic {
            name: name.into(),
            partitions: partitions.to_vec(),
        }
    }

    fn encoded(flexible: bool, topics: &[Topic<i32>]) -> WireReader {
        let mut w = WireWriter::new();
        write_topics(&Flex(flexible), &mut w, &LAYOUT, topics, |w, p| w.i32(*p));
        WireReader::new(w.into_inner().freeze())
    }

    /// Flat partitions write what their grouping into topics writes: consecutive partitions of
    /// a topic share an entry, a topic named again later gets a second one, and none is empty.
    #[test]
    fn flat_partitions_write_the_bytes_of_their_topics() {
        fn topic_of<'a>(p: &'a (&str, i32)) -> &'a str {
            p.0
        }
        let flat: Vec<(&str, i32)> = vec![("a", 0), ("a", 7), ("b", 1), ("a", 2)];
        let grouped = vec![topic("a", &[0, 7]), topic("b", &[1]), topic("a", &[2])];
        for flexible in [false, true] {
            for cut in 0..=flat.len() {
                let flex = Flex(flexible);
                let mut w = WireWriter::new();
                write_flat_topics(&flex, &mut w, &LAYOUT, &flat[..cut], topic_of, |w, p| {
                    w.i32(p.1)
                });
                let expected: Vec<Topic<i32>> = match cut {
                    0 => vec![],
                    1 => vec![topic("a", &[0])],
                    2 => grouped[..1].to_vec(),
                    3 => grouped[..2].to_vec(),
                    _ => grouped.clone(),
                };
                let reference = WireWriter::bytes_of(|w| {
                    write_topics(&flex, w, &LAYOUT, &expected, |w, p| w.i32(*p))
                });
                assert_eq!(
                    w.into_inner().freeze(),
                    reference,
                    "flexible {flexible}, {cut} partitions"
                );
            }
        }
    }

    #[test]
    fn topics_round_trip_in_both_encodings() {
        let topics = vec![topic("a", &[0, 7]), topic("b", &[])];
        for flexible in [false, true] {
            let mut r = encoded(flexible, &topics);
            let flex = Flex(flexible);
            let back = read_topics(&flex, &mut r, &mut Budget::new(), &LAYOUT, |r| {
                r.i32("partition")
            });
            assert_eq!(back, Ok(topics.clone()), "flexible {flexible}");
            assert_eq!(r.finish(), Ok(()));
        }
    }

    /// A count the bytes left cannot hold is refused up front, naming the array as the layout
    /// calls it and against the layout's smallest topic.
    #[test]
    fn a_count_too_large_for_the_bytes_names_the_layouts_array() {
        let layout = TopicsLayout::new(4)
            .named("responses", "partition responses")
            .min_topic_bytes(6);
        let read = |bytes: &'static [u8]| {
            let mut r = WireReader::new(bytes::Bytes::from_static(bytes));
            read_topics(&Flex(false), &mut r, &mut Budget::new(), &layout, |r| {
                r.i32("partition")
            })
        };
        // Two topics in 11 bytes: they fit at 3 bytes a topic, not at 6.
        let err = read(&[0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap_err();
        assert!(
            matches!(
                err,
                WireError::ArrayTooLong {
                    field: "responses",
                    count: 2,
                    remaining: 11
                }
            ),
            "{err}"
        );
        // One topic "t" with three partitions in 8 bytes.
        let err = read(&[0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap_err();
        assert!(
            matches!(
                err,
                WireError::ArrayTooLong {
                    field: "partition responses",
                    count: 3,
                    remaining: 8
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn the_budget_spans_every_array_read_with_it() {
        let topics = vec![topic("t", &[1; 600])];
        let mut budget = Budget::new();
        let read = |r: &mut WireReader, budget: &mut Budget| {
            read_topics(&Flex(true), r, budget, &LAYOUT, |r| r.i32("partition"))
        };
        assert!(read(&mut encoded(true, &topics), &mut budget).is_ok());
        assert!(matches!(
            read(&mut encoded(true, &topics), &mut budget),
            Err(WireError::TooMany {
                field: "partitions",
                count: 1200,
                limit: 1000
            })
        ));
    }
}
