//! Arbitrary bytes into the frame splitter, fed in chunks of many sizes. It must never panic,
//! never hand out a frame larger than the limit, never buffer more than it was given, and hand
//! out exactly the frames a plain reading of the stream finds (size, then that many bytes),
//! whether it cuts them from its buffer or copies them out. As a server's splitter each whole
//! frame is decoded as a request (header, then the quorum RPC body); as a client's (responses,
//! with the copy threshold set low so that short inputs reach the copy) as a
//! FetchQuorumRecords response, the one that carries large frames.
//!
//! The first byte picks the splitter (high bit), the chunk size (low 6 bits, plus 1) and, for
//! responses, the copy threshold (17 bytes with bit 6 set, else 1); the rest is the byte stream of
//! one connection.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use net::wire::{api, quorum, FrameDecoder, RequestHeader, WireReader};

const MAX_FRAME: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let Some((&control, stream)) = data.split_first() else {
        return;
    };
    let responses = control & 0x80 != 0;
    let chunk = usize::from(control & 0x3f) + 1;
    let mut decoder = if responses {
        let copy_from = 16 * usize::from((control >> 6) & 1) + 1;
        FrameDecoder::for_responses_copying_from(MAX_FRAME, copy_from)
    } else {
        FrameDecoder::for_requests(MAX_FRAME)
    };
    let mut expected = PlainReading { stream, at: 0 };
    for piece in stream.chunks(chunk) {
        decoder.extend(piece);
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => {
                    assert!(frame.len() <= MAX_FRAME);
                    assert_eq!(
                        Some(&frame[..]),
                        expected.next(),
                        "a frame as the stream has it"
                    );
                    if responses {
                        response(frame);
                    } else {
                        request(frame);
                    }
                }
                Ok(None) => break,
                Err(_) => return, // the connection would be closed
            }
        }
        assert!(decoder.buffered() <= stream.len());
    }
});

/// The stream's frames read the simplest way: a big-endian size, then that many bytes.
struct PlainReading<'a> {
    stream: &'a [u8],
    at: usize,
}

impl<'a> PlainReading<'a> {
    fn next(&mut self) -> Option<&'a [u8]> {
        let rest = &self.stream[self.at..];
        let size = i32::from_be_bytes(rest.get(..4)?.try_into().ok()?);
        let frame = rest.get(4..4 + usize::try_from(size).ok()?)?;
        self.at += 4 + frame.len();
        Some(frame)
    }
}

fn request(frame: Bytes) {
    let mut r = WireReader::new(frame);
    let Ok(header) = RequestHeader::read(&mut r, true) else {
        return;
    };
    // As the node routes them: only versions the API table supports reach a decoder.
    if api::quorum_api(header.api_key).is_some_and(|spec| spec.supports(header.api_version)) {
        let _ = quorum::decode_request(header.api_key, header.api_version, &mut r);
    }
}

fn response(frame: Bytes) {
    let mut r = WireReader::new(frame);
    if r.i32("correlation_id").is_ok() {
        let _ = quorum::decode_response_with(api::FETCH_QUORUM_RECORDS, &mut r);
    }
}
