package mask

import (
	"bufio"
	"encoding/base64"
	"io"
	"net/url"
	"strings"
	"testing"
)

// reflectValue has what encodings treat apart: '/', '+', a space, a
// quote, a backslash and a non-ASCII letter (egress's reflecting-host
// tests use the same).
const reflectValue = `k3y/Zq7+Wm9 Xk4"Tr8\R2dé8Vn3Lb6Hj1`

// TestMaskReaderSplits: a value cut at every byte between two reads of
// the upstream's body is masked whole, and nothing else is touched.
func TestMaskReaderSplits(t *testing.T) {
	m := New([]string{reflectValue})
	in := "before " + reflectValue + " after"
	want := "before " + strings.Repeat("*", len(reflectValue)) + " after"
	for cut := 0; cut <= len(in); cut++ {
		r := m.Reader(io.NopCloser(io.MultiReader(strings.NewReader(in[:cut]), strings.NewReader(in[cut:]))))
		got, err := io.ReadAll(bufio.NewReaderSize(r, 16))
		if err != nil || string(got) != want {
			t.Fatalf("cut at %d: %q %v", cut, got, err)
		}
	}
}

// BenchmarkMask: the masking's cost per byte of a body with no match.
func BenchmarkMask(b *testing.B) {
	m := New([]string{reflectValue, "ghp_Zq7Wm9Xk4Tr8R2d8Vn3Lb6Hj1Qa"})
	data := []byte(strings.Repeat("The quick brown fox jumps over the lazy dog. 0123456789\n", 1<<14))
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		r := m.Reader(io.NopCloser(strings.NewReader(string(data))))
		io.Copy(io.Discard, r)
	}
}

// FuzzMask: the body, streamed in two reads cut anywhere, is masked as the
// whole of it is at once, keeps its length, and holds no secret.
func FuzzMask(f *testing.F) {
	f.Add("x"+reflectValue+"y", 3)
	f.Add(base64.StdEncoding.EncodeToString([]byte("u"+reflectValue)), 20)
	f.Add(strings.ToUpper(url.QueryEscape(reflectValue)), 0)
	m := New([]string{reflectValue})
	f.Fuzz(func(t *testing.T, in string, cut int) {
		if cut < 0 || cut > len(in) {
			cut = len(in) / 2
		}
		r := m.Reader(io.NopCloser(io.MultiReader(strings.NewReader(in[:cut]), strings.NewReader(in[cut:]))))
		got, err := io.ReadAll(r)
		if err != nil || string(got) != m.String(in) || len(got) != len(in) {
			t.Fatalf("streamed %q, whole %q (%v)", got, m.String(in), err)
		}
		if strings.Contains(strings.ToLower(string(got)), strings.ToLower(reflectValue)) {
			t.Fatalf("the value survived: %q", got)
		}
	})
}
