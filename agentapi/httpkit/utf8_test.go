package httpkit

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/nsbox/nsbox/daemon/errdefs"
)

func readAllUTF8(r io.Reader) ([]byte, error) { return io.ReadAll(&utf8Reader{r: r}) }

func TestUTF8Reader(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		badAt    int // -1: valid
	}{
		{"ascii", `{"code":"print(1)"}`, -1},
		{"multibyte", `{"text":"héllo €𝄞 日本"}`, -1},
		{"bad byte", "{\"text\":\"a\xffb\"}", 10},
		{"cut sequence", "{\"text\":\"\xe2\x82\"}", 9},
		{"cut at the end", "\"\xe2\x82", 1},
		{"overlong", "\"\xc0\xaf\"", 1},
	} {
		for _, one := range []bool{false, true} {
			var r io.Reader = strings.NewReader(tc.in)
			if one { // every sequence split across reads
				r = iotest.OneByteReader(r)
			}
			out, err := readAllUTF8(r)
			if tc.badAt < 0 {
				if err != nil || string(out) != tc.in {
					t.Errorf("%s (one byte a read: %v): %q, %v; want it unchanged", tc.name, one, out, err)
				}
				continue
			}
			var fe *errdefs.FieldError
			if !errors.As(err, &fe) || !strings.Contains(fe.Msg, "not valid UTF-8 at byte ") || !strings.Contains(fe.Msg, "content_base64") {
				t.Errorf("%s (one byte a read: %v): err %v, want a field error pointing at content_base64", tc.name, one, err)
			} else if want := "at byte " + strconv.Itoa(tc.badAt) + ":"; !strings.Contains(fe.Msg, want) {
				t.Errorf("%s (one byte a read: %v): %q does not say %q", tc.name, one, fe.Msg, want)
			}
		}
	}
}

func FuzzUTF8Reader(f *testing.F) {
	for _, s := range []string{"", "abc", "h\xc3\xa9", "\xff", "\xe2\x82", "𝄞x"} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		r := iotest.HalfReader(bytes.NewReader(in))
		if chunk%2 == 0 {
			r = iotest.OneByteReader(bytes.NewReader(in))
		}
		out, err := readAllUTF8(r)
		if utf8Valid := err == nil; utf8Valid != utf8.Valid(in) {
			t.Fatalf("%q: reader says valid=%v (%v)", in, utf8Valid, err)
		}
		if err == nil && !bytes.Equal(out, in) {
			t.Fatalf("%q came out as %q", in, out)
		}
	})
}
