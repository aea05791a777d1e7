package httpkit

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// tricky holds the bytes a JSON string encoder can get wrong: invalid
// UTF-8, control characters, HTML characters, U+2028 and U+2029, quotes
// and backslashes, multi-byte runes.
var tricky = []string{
	"",
	"plain ascii",
	"\x00\x01\x07\b\f\n\r\t\x1f\x7f",
	"<script>&amp;</script>",
	"\u2028\u2029",
	`"\/`,
	"h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80",
	"\xff\xfe\xc3\x28\xe2\x82\xed\xa0\x80\xf0\x9f\x98",
	"\x80\x80\x80\x80\x80",
	"\ufffd",
}

func TestWriteJSONStringMatchesEncodingJSON(t *testing.T) {
	var cases []string
	cases = append(cases, tricky...)
	// Past a chunk, with every tricky string cut at every offset around
	// the chunk's edge: a rune or an invalid sequence across the cut.
	for _, s := range tricky {
		for pad := jsonChunk - 8; pad <= jsonChunk+1; pad++ {
			cases = append(cases, strings.Repeat("a", pad)+s+strings.Repeat("\u2028", 3))
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, 3*jsonChunk+17)
	for i := range big {
		big[i] = byte(r.IntN(256))
	}
	cases = append(cases, string(big), strings.Repeat("é€😀<\u2028\xff", 40000))
	for i, s := range cases {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		n, err := WriteJSONString(&got, s)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("case %d (%d bytes): encodings differ\n got %.200q\nwant %.200q", i, len(s), got.Bytes(), want)
		}
		if n != int64(len(want)) {
			t.Fatalf("case %d: WriteJSONString said %d bytes, wrote %d", i, n, len(want))
		}
	}
}

func TestBigJSONMatchesMarshal(t *testing.T) {
	type inner struct {
		Text  string `json:"text"`
		Other string `json:"other,omitempty"`
	}
	type doc struct {
		ID     string `json:"id"`
		Stdout string `json:"stdout"`
		Stderr string `json:"stderr"`
		Empty  string `json:"empty,omitempty"`
		In     *inner `json:"in"`
		N      int    `json:"n"`
	}
	big := strings.Repeat("x<\u2028\xff\n", 3*jsonChunk)
	v := &doc{ID: "r1", Stdout: big, Stderr: "e\x00rr", In: &inner{Text: big[1:]}, N: 7}
	want, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	// Out of the fields' order: the encoding's order is found.
	d, err := NewBigJSON(v, &v.In.Text, &v.Stderr, &v.Empty, &v.Stdout, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v.Stdout != big || v.Empty != "" || v.In.Text != big[1:] {
		t.Fatal("NewBigJSON did not put the strings back")
	}
	var got bytes.Buffer
	n, err := d.WriteTo(&got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("encodings differ: got %d bytes, want %d", got.Len(), len(want))
	}
	if n != d.Len() || d.Len() != int64(len(want)) {
		t.Fatalf("Len %d, WriteTo %d, want %d", d.Len(), n, len(want))
	}
}

func BenchmarkWriteJSONString(b *testing.B) {
	s := strings.Repeat("some output line with <tags> and \t tabs\n", 1<<16)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if _, err := WriteJSONString(discard{}, s); err != nil {
			b.Fatal(err)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
