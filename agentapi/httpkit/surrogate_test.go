package httpkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/nsbox/nsbox/daemon/errdefs"
)

func TestSurrogateReader(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		field    string // "-": valid
		at       int
	}{
		{"no escapes", `{"a":"héllo"}`, "-", 0},
		{"a pair", `{"a":"\ud83d\ude00"}`, "-", 0},
		{"a pair in capitals", `{"a":"\uD83D\uDE00"}`, "-", 0},
		{"a BMP escape", `{"a":"\u00e9\uffff\ud7ff\ue000"}`, "-", 0},
		{"an escaped backslash", `{"a":"\\ud800"}`, "-", 0},
		{"a surrogate-like key outside strings", `{"ud800":1}`, "-", 0},
		{"a lone high", `{"a":"\ud800"}`, "a", 6},
		{"a lone low", `{"a":"x\udc00"}`, "a", 7},
		{"a high then a letter", `{"a":"\ud800x"}`, "a", 6},
		{"a high then another escape", `{"a":"\ud800\n"}`, "a", 6},
		{"two highs", `{"a":"\ud800\ud800"}`, "a", 6},
		{"a high then a BMP escape", `{"a":"\ud800\u0041"}`, "a", 6},
		{"low then high", `{"a":"\udc00\ud800"}`, "a", 6},
		{"after an escaped backslash", `{"a":"\\\ud800"}`, "a", 8},
		{"a top-level string", `"\udfff"`, "", 1},
		{"in a list", `{"files":[{"path":"a"},{"path":"b","text":"\ud800"}]}`, "files[1].text", 43},
		{"nested", `{"a":{"b":[1,{"c":2},"\udbff"]},"d":0}`, "a.b[2]", 22},
		{"after a closed object", `{"a":{"b":1},"c":"\ud800"}`, "c", 18},
		{"in a key", `{"x":1,"k\udc00":1}`, "k\ufffd", 9},
		{"an escaped key", `{"k\u00e9y":"\ud800"}`, "kéy", 13},
	} {
		for _, one := range []bool{false, true} {
			var r io.Reader = strings.NewReader(tc.in)
			if one { // every escape split across reads
				r = iotest.OneByteReader(r)
			}
			out, err := io.ReadAll(&surrogateReader{r: r})
			if tc.field == "-" {
				if err != nil || string(out) != tc.in {
					t.Errorf("%s (one byte a read: %v): %q, %v; want it unchanged", tc.name, one, out, err)
				}
				continue
			}
			var fe *errdefs.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Msg, "lone UTF-16 surrogate escape at byte "+strconv.Itoa(tc.at)+":") {
				t.Errorf("%s (one byte a read: %v): %v (%#v), want a field error naming %q at byte %d", tc.name, one, err, fe, tc.field, tc.at)
			}
		}
	}
}

// TestSurrogateDecode: the decoders of /v1 and E2B refuse what
// encoding/json alone would turn into U+FFFD.
func TestSurrogateDecode(t *testing.T) {
	body := `{"a":"\ud800","inner":{"b":1}}`
	var plain sample
	if err := json.Unmarshal([]byte(body), &plain); err != nil || plain.A != "\ufffd" {
		t.Fatalf("encoding/json: %+v, %v; this test assumes it replaces the escape silently", plain, err)
	}
	for _, l := range []Lenience{{}, {UnknownFields: true, Empty: true, AnyMediaType: true}} {
		var v sample
		var fe *errdefs.FieldError
		if err := l.Decode(strings.NewReader(body), &v); !errors.As(err, &fe) || fe.Field != "a" {
			t.Errorf("%+v: %v, want a field error naming a", l, err)
		}
	}
}

// A string literal in valid JSON (no '"' occurs outside one), and its
// escapes and other characters, for the reference judge below.
var (
	stringLit = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	strPart   = regexp.MustCompile(`\\u[0-9a-fA-F]{4}|\\.|[^\\]`)
)

// hasLone is a reference judge of valid JSON: whole strings at a time,
// by regular expressions, where surrogateReader streams.
func hasLone(in []byte) bool {
	for _, lit := range stringLit.FindAll(in, -1) {
		high := false
		for _, part := range strPart.FindAll(lit[1:len(lit)-1], -1) {
			var code uint64 = 0x20
			if len(part) == 6 && part[1] == 'u' {
				code, _ = strconv.ParseUint(string(part[2:]), 16, 32)
			}
			low := code >= 0xDC00 && code <= 0xDFFF
			switch {
			case high && !low, !high && low:
				return true
			case high:
				high = false
			default:
				high = code >= 0xD800 && code <= 0xDBFF
			}
		}
		if high {
			return true
		}
	}
	return false
}

func FuzzSurrogateReader(f *testing.F) {
	for _, s := range []string{`{"a":"x"}`, `"\ud800"`, `"\ud83d\ude00"`, `["\\ud800"]`, `{"k\udc00":[1,"\ud800\u0041"]}`, `"\ud800\"`} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		r := iotest.HalfReader(bytes.NewReader(in))
		if chunk%2 == 0 {
			r = iotest.OneByteReader(bytes.NewReader(in))
		}
		out, err := io.ReadAll(&surrogateReader{r: r})
		if err == nil && !bytes.Equal(out, in) {
			t.Fatalf("%q came out as %q", in, out)
		}
		if !json.Valid(in) {
			return // malformed: encoding/json says so; only no panic here
		}
		if lone := err != nil; lone != hasLone(in) {
			t.Fatalf("%q: reader says lone=%v (%v), the reference %v", in, lone, err, !lone)
		}
	})
}

// BenchmarkSurrogateReader: the scan's cost on a large text field, with
// and without escapes (the decoder's own cost is many times this).
func BenchmarkSurrogateReader(b *testing.B) {
	for _, tc := range []struct{ name, unit string }{{"text", "abcdefgh"}, {"escapes", `\u00e9\n\ud83d\ude00`}} {
		body := []byte(`{"files":[{"path":"a","text":"` + strings.Repeat(tc.unit, 1<<20/len(tc.unit)) + `"}]}`)
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := io.Copy(io.Discard, &surrogateReader{r: bytes.NewReader(body)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
