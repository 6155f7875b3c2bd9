//! The publisher's stream and its serial apply: every message round-trips through its bytes,
//! arbitrary bytes never panic the decoder, and the serial apply of any generated stream —
//! streamed or not, with aborts, several transactions at a time — ends with the publisher's
//! own rows and commit order, without a conflict.

use pglocks_apply::{apply_serially, publish, Change, Message, ProtoError, PublisherConfig, Row};
use proptest::prelude::*;

fn change() -> impl Strategy<Value = Change> {
    let row = (any::<i64>(), any::<i64>()).prop_map(|(key, value)| Row { key, value });
    prop_oneof![
        row.clone().prop_map(Change::Insert),
        row.prop_map(Change::Update),
        any::<i64>().prop_map(Change::Delete),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (any::<u64>(), any::<i64>(), any::<u32>()).prop_map(|(final_lsn, commit_time, xid)| {
            Message::Begin {
                final_lsn,
                commit_time,
                xid,
            }
        }),
        (any::<u64>(), any::<u64>(), any::<i64>()).prop_map(
            |(commit_lsn, end_lsn, commit_time)| {
                Message::Commit {
                    commit_lsn,
                    end_lsn,
                    commit_time,
                }
            }
        ),
        (proptest::option::of(any::<u32>()), any::<u32>(), change())
            .prop_map(|(xid, rel, change)| Message::Change { xid, rel, change }),
        (any::<u32>(), any::<bool>())
            .prop_map(|(xid, first_segment)| Message::StreamStart { xid, first_segment }),
        Just(Message::StreamStop),
        (any::<u32>(), any::<u64>(), any::<u64>(), any::<i64>()).prop_map(
            |(xid, commit_lsn, end_lsn, commit_time)| Message::StreamCommit {
                xid,
                commit_lsn,
                end_lsn,
                commit_time
            }
        ),
        (any::<u32>(), any::<u32>()).prop_map(|(xid, subxid)| Message::StreamAbort { xid, subxid }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_message_round_trips(m in message()) {
        let in_stream = matches!(m, Message::Change { xid: Some(_), .. });
        prop_assert_eq!(Message::decode(&m.to_bytes(), in_stream), Ok(m));
    }

    #[test]
    fn no_bytes_panic_the_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..64), s in any::<bool>()) {
        let _ = Message::decode(&bytes, s);
    }

    #[test]
    fn the_serial_apply_of_any_stream_ends_as_the_publisher_did(
        seed in any::<u64>(),
        concurrent in 1..6usize,
        work_mem in 1..40usize,
        streaming in any::<bool>(),
        large_every in 0..5usize,
    ) {
        let cfg = PublisherConfig {
            tables: 2,
            small_changes: 6,
            large_changes: 60,
            large_every,
            work_mem_changes: work_mem,
            streaming,
            concurrent,
            abort_ratio: 0.2,
            existing_ratio: 0.4,
            seed,
        };
        let published = publish(&cfg, 40);
        // Every message survives its bytes, as the apply worker receives them.
        let mut in_stream = false;
        for m in &published.messages {
            let decoded = Message::decode(&m.to_bytes(), in_stream).unwrap();
            prop_assert_eq!(decoded, *m);
            in_stream = match m {
                Message::StreamStart { .. } => true,
                Message::StreamStop => false,
                _ => in_stream,
            };
        }
        let applied = apply_serially(&published.messages).unwrap();
        prop_assert!(applied.conflicts.is_empty(), "{:?}", applied.conflicts);
        prop_assert_eq!(&applied.rows, &published.rows);
        prop_assert_eq!(&applied.commit_order, &published.commit_order);
        if !streaming {
            prop_assert_eq!(published.streamed, 0);
        }
    }
}

#[test]
fn large_transactions_are_streamed_in_chunks_and_small_ones_sent_whole() {
    let cfg = PublisherConfig {
        large_changes: 1_000,
        large_every: 4,
        work_mem_changes: 100,
        concurrent: 3,
        abort_ratio: 0.0,
        ..PublisherConfig::default()
    };
    let p = publish(&cfg, 20);
    assert_eq!(p.commit_order.len(), 20);
    assert!(p.streamed >= 5, "{} streamed", p.streamed);
    let starts = p
        .messages
        .iter()
        .filter(|m| matches!(m, Message::StreamStart { .. }))
        .count();
    assert!(
        starts > p.streamed,
        "large transactions go out in several chunks"
    );
    assert!(p
        .messages
        .iter()
        .any(|m| matches!(m, Message::Begin { .. })));
    // Without streaming, the same run sends everything whole.
    let whole = publish(
        &PublisherConfig {
            streaming: false,
            ..cfg
        },
        20,
    );
    assert_eq!(whole.streamed, 0);
    assert_eq!(whole.rows, p.rows);
}

#[test]
fn malformed_streams_are_refused_with_a_typed_error() {
    let change = Message::Change {
        xid: None,
        rel: 1,
        change: Change::Delete(3),
    };
    assert!(apply_serially(&[change]).is_err());
    assert!(apply_serially(&[Message::StreamStop]).is_err());
    let open = Message::StreamStart {
        xid: 7,
        first_segment: true,
    };
    let e = apply_serially(&[open]).unwrap_err().to_string();
    assert!(e.contains("ends inside a transaction"), "{e}");
    assert_eq!(
        Message::decode(b"Z", false),
        Err(ProtoError::UnknownType(b'Z'))
    );
    assert_eq!(
        Message::decode(b"S\0\0", false),
        Err(ProtoError::Truncated(3))
    );
}
