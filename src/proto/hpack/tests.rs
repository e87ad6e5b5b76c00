//! RFC 7541 Appendix C's examples, the error cases, and pseudo-random input.

use super::*;

pub(super) fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn fields(d: &mut Decoder, block: &str) -> Result<Vec<(String, String)>, HpackError> {
    let mut got = Vec::new();
    d.decode(&hex(block), |n, v| {
        got.push((
            String::from_utf8(n.to_vec()).unwrap(),
            String::from_utf8(v.to_vec()).unwrap(),
        ))
    })?;
    Ok(got)
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

/// The dynamic table, newest first, and its size.
fn table(d: &Decoder) -> (Vec<(String, String)>, usize) {
    let t = d
        .table
        .iter()
        .map(|e| {
            (
                String::from_utf8(e.name().to_vec()).unwrap(),
                String::from_utf8(e.value().to_vec()).unwrap(),
            )
        })
        .collect();
    (t, d.size)
}

#[test]
fn c2_single_fields() {
    let mut d = Decoder::new(4096, 1 << 16);
    let c21 = "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572";
    assert_eq!(
        fields(&mut d, c21).unwrap(),
        pairs(&[("custom-key", "custom-header")])
    );
    assert_eq!(table(&d).1, 55);
    let mut d = Decoder::new(4096, 1 << 16);
    let c22 = "040c 2f73 616d 706c 652f 7061 7468";
    assert_eq!(
        fields(&mut d, c22).unwrap(),
        pairs(&[(":path", "/sample/path")])
    );
    assert_eq!(table(&d).1, 0);
    let c23 = "1008 7061 7373 776f 7264 0673 6563 7265 74";
    assert_eq!(
        fields(&mut d, c23).unwrap(),
        pairs(&[("password", "secret")])
    );
    assert_eq!(table(&d).1, 0);
    assert_eq!(fields(&mut d, "82").unwrap(), pairs(&[(":method", "GET")]));
}

/// C.3 (plain) and C.4 (Huffman): the same three requests on one
/// connection, the table growing.
#[test]
fn c3_c4_requests_with_and_without_huffman() {
    let blocks = [
        [
            "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
            "8286 84be 5808 6e6f 2d63 6163 6865",
            "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
        ],
        [
            "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
            "8286 84be 5886 a8eb 1064 9cbf",
            "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        ],
    ];
    for b in blocks {
        let mut d = Decoder::new(4096, 1 << 16);
        let base = [
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":authority", "www.example.com"),
        ];
        assert_eq!(fields(&mut d, b[0]).unwrap(), pairs(&base));
        assert_eq!(table(&d), (pairs(&[(":authority", "www.example.com")]), 57));
        let mut second = base.to_vec();
        second.push(("cache-control", "no-cache"));
        assert_eq!(fields(&mut d, b[1]).unwrap(), pairs(&second));
        assert_eq!(table(&d).1, 110);
        let third = [
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/index.html"),
            (":authority", "www.example.com"),
            ("custom-key", "custom-value"),
        ];
        assert_eq!(fields(&mut d, b[2]).unwrap(), pairs(&third));
        assert_eq!(
            table(&d),
            (
                pairs(&[
                    ("custom-key", "custom-value"),
                    ("cache-control", "no-cache"),
                    (":authority", "www.example.com"),
                ]),
                164
            )
        );
    }
}

/// C.5 (plain) and C.6 (Huffman): three responses in a 256-byte table,
/// entries evicted.
#[test]
fn c5_c6_responses_with_eviction() {
    let blocks = [
        [
            "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 \
             2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 \
             6c65 2e63 6f6d",
            "4803 3330 37c1 c0bf",
            "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d \
             54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 \
             5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e \
             3d31",
        ],
        [
            "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 \
             2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
            "4883 640e ffc1 c0bf",
            "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab \
             77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f \
             9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        ],
    ];
    for b in blocks {
        let mut d = Decoder::new(256, 1 << 16);
        let date1 = "Mon, 21 Oct 2013 20:13:21 GMT";
        let loc = "https://www.example.com";
        let first = [
            (":status", "302"),
            ("cache-control", "private"),
            ("date", date1),
            ("location", loc),
        ];
        assert_eq!(fields(&mut d, b[0]).unwrap(), pairs(&first));
        assert_eq!(table(&d).1, 222);
        let mut second = first;
        second[0].1 = "307";
        assert_eq!(fields(&mut d, b[1]).unwrap(), pairs(&second));
        // :status 302 was evicted for 307.
        assert_eq!(
            table(&d),
            (
                pairs(&[
                    (":status", "307"),
                    ("location", loc),
                    ("date", date1),
                    ("cache-control", "private"),
                ]),
                222
            )
        );
        let cookie = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
        let third = [
            (":status", "200"),
            ("cache-control", "private"),
            ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
            ("location", loc),
            ("content-encoding", "gzip"),
            ("set-cookie", cookie),
        ];
        assert_eq!(fields(&mut d, b[2]).unwrap(), pairs(&third));
        let (t, size) = table(&d);
        assert_eq!(size, 215);
        assert_eq!(t.len(), 3);
        assert_eq!(t[0], ("set-cookie".to_string(), cookie.to_string()));
    }
}

#[test]
fn malformed_blocks_are_errors() {
    let mut d = Decoder::new(4096, 1 << 16);
    // Index 0, and one past the static table with an empty dynamic one.
    assert_eq!(d.decode(&[0x80], |_, _| {}), Err(HpackError::BadIndex(0)));
    assert_eq!(d.decode(&[0xbe], |_, _| {}), Err(HpackError::BadIndex(62)));
    // An integer past 32 bits, and one cut short.
    let big = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
    assert_eq!(d.decode(&big, |_, _| {}), Err(HpackError::IntegerOverflow));
    assert_eq!(
        d.decode(&[0xff, 0x80], |_, _| {}),
        Err(HpackError::Truncated)
    );
    // A string longer than the block.
    assert_eq!(
        d.decode(&[0x00, 0x05, b'a'], |_, _| {}),
        Err(HpackError::Truncated)
    );
    // A table size update above our 4096, one within it, and one late.
    let mut up = Vec::new();
    put_integer(&mut up, 0x20, 5, 4097);
    assert_eq!(
        d.decode(&up, |_, _| {}),
        Err(HpackError::TableSizeTooLarge(4097))
    );
    let mut ok = Vec::new();
    put_integer(&mut ok, 0x20, 5, 100);
    assert_eq!(d.decode(&ok, |_, _| {}), Ok(()));
    let mut late = vec![0x82];
    late.extend(&ok);
    assert_eq!(
        d.decode(&late, |_, _| {}),
        Err(HpackError::LateTableSizeUpdate)
    );
    // A bad Huffman string (EOS).
    assert_eq!(
        d.decode(&[0x00, 0x81, 0xff, 0x81, 0xff], |_, _| {}),
        Err(HpackError::Huffman)
    );
    // Over the header list cap.
    let mut small = Decoder::new(4096, 40);
    assert_eq!(
        small.decode(&hex("8286"), |_, _| {}),
        Err(HpackError::ListTooLarge)
    );
}

#[test]
fn the_table_size_update_shrinks_and_evicts() {
    let mut d = Decoder::new(4096, 1 << 16);
    fields(
        &mut d,
        "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
    )
    .unwrap();
    assert_eq!(table(&d).1, 55);
    // Size 0 empties the table; the entry's index is then out of range.
    assert_eq!(d.decode(&[0x20, 0x82], |_, _| {}), Ok(()));
    assert_eq!(table(&d).1, 0);
    assert_eq!(d.decode(&[0xbe], |_, _| {}), Err(HpackError::BadIndex(62)));
}

#[test]
fn request_fields_encode_to_what_the_decoder_reads() {
    let mut block = Vec::new();
    let want = [
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/index.html"),
        (":authority", "127.0.0.1:8080"),
        ("content-type", "application/grpc"),
        ("x-custom", "v"),
        ("user-agent", "a".repeat(300).leak() as &str),
    ];
    for (n, v) in want {
        put_field(&mut block, n, v);
    }
    // Indexed fields are one byte each.
    assert_eq!(&block[..3], &[0x82, 0x86, 0x85]);
    let mut d = Decoder::new(4096, 1 << 16);
    let mut got = Vec::new();
    d.decode(&block, |n, v| got.push((n.to_vec(), v.to_vec())))
        .unwrap();
    let want: Vec<_> = want
        .iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect();
    assert_eq!(got, want);
    // Nothing went into the peer's dynamic table.
    assert_eq!(table(&d).1, 0);
}

#[test]
fn unwanted_unindexed_values_are_skipped_and_the_rest_still_decodes() {
    let mut block = Vec::new();
    // server: <bad Huffman>, literal without indexing (name index 54).
    block.extend([0x0f, 0x27, 0x81, 0xff]);
    // x-kept: v, literal with incremental indexing: always decoded.
    block.extend([0x40, 0x06]);
    block.extend(b"x-kept");
    block.extend([0x01, b'v']);
    block.push(0x88); // :status 200
    let mut d = Decoder::new(4096, 1 << 16);
    let mut got = Vec::new();
    let want = |n: &[u8]| n == b":status";
    d.decode_wanted(&block, want, |n, v| got.push((n.to_vec(), v.to_vec())))
        .unwrap();
    assert_eq!(got, [(b":status".to_vec(), b"200".to_vec())]);
    assert_eq!(table(&d).0, pairs(&[("x-kept", "v")]));
    // Decoding every field finds the bad string.
    let mut d = Decoder::new(4096, 1 << 16);
    assert_eq!(d.decode(&block, |_, _| {}), Err(HpackError::Huffman));
}

#[test]
fn memoized_huffman_strings_decode_as_fresh_ones() {
    // C.4.2's block twice, then C.4.3's on the same connection: the second
    // "no-cache" comes from the memo, and a bad string in a slot's place
    // is still an error.
    let mut d = Decoder::new(4096, 1 << 16);
    fields(&mut d, "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff").unwrap();
    for _ in 0..2 {
        let got = fields(&mut d, "8286 84be 5886 a8eb 1064 9cbf").unwrap();
        assert_eq!(
            got[4],
            ("cache-control".to_string(), "no-cache".to_string())
        );
    }
    let mut m = Memo::default();
    assert_eq!(m.decode(&hex("a8eb 1064 9cbf")).unwrap(), b"no-cache");
    assert_eq!(m.decode(&hex("a8eb 1064 9cbf")).unwrap(), b"no-cache");
    assert_eq!(m.decode(&hex("ffff ffff")), Err(HpackError::Huffman));
    assert_eq!(m.decode(&hex("ffff ffff")), Err(HpackError::Huffman));
}
