//! Arbitrary bytes into the frame splitter, fed in chunks of every size, with each whole frame
//! decoded as a request (header, then the quorum RPC body). It must never panic, never hand out a
//! frame larger than the limit, and never buffer more than it was given.
//!
//! The first byte picks the chunk size; the rest is the byte stream of one connection.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use net::wire::{api, quorum, FrameDecoder, RequestHeader, WireReader};

const MAX_FRAME: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, stream)) = data.split_first() else {
        return;
    };
    let mut decoder = FrameDecoder::for_requests(MAX_FRAME);
    for piece in stream.chunks(usize::from(chunk) + 1) {
        decoder.extend(piece);
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => {
                    assert!(frame.len() <= MAX_FRAME);
                    request(frame);
                }
                Ok(None) => break,
                Err(_) => return, // the connection would be closed
            }
        }
        assert!(decoder.buffered() <= stream.len());
    }
});

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
