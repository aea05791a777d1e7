package load

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// oddRequests: requests a parser or a limit must refuse with a 4xx that
// says why, never a 5xx: oversized bash code, invalid UTF-8, 100k-deep
// JSON, a NUL in a path, a 1 GiB declared body.
func (s *suite) oddRequests(t *testing.T, sc *scenario) {
	d := sc.start()
	post := func(body []byte) (int, string, error) {
		resp, err := d.HTTP.Post("http://nsbox/v1/runs", "application/json", bytes.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	for _, c := range []struct {
		name string
		body []byte
		want func(status int) bool
	}{
		{"200 KB of bash", []byte(`{"language":"bash","code":"` + strings.Repeat("echo 0123456789; ", 12<<10) + `"}`),
			func(st int) bool { return st == http.StatusOK || (st >= 400 && st < 500) }},
		{"invalid UTF-8", []byte("{\"language\":\"python\",\"code\":\"print('\xff')\"}"), is(http.StatusBadRequest)},
		{"100k-deep JSON", []byte(`{"argv":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`), is(http.StatusBadRequest)},
		{"NUL in a path", []byte(`{"argv":["true"],"files":[{"path":"a\u0000b","text":"x"}]}`), is(http.StatusBadRequest)},
	} {
		sc.timed(func() error {
			st, body, err := post(c.body)
			if err == nil && !c.want(st) {
				err = fmt.Errorf("%s: %d %.200s", c.name, st, body)
			}
			return err
		})
	}
	sc.timed(func() error { // refused before a byte of the body is read
		c, err := net.Dial("unix", d.Sock)
		if err != nil {
			return err
		}
		defer c.Close()
		if _, err := io.WriteString(c, "POST /v1/runs HTTP/1.1\r\nHost: nsbox\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n{"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return fmt.Errorf("1 GiB declared body: %w", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			return fmt.Errorf("1 GiB declared body: %s, want 413", resp.Status)
		}
		return nil
	})
}

func is(want int) func(int) bool { return func(st int) bool { return st == want } }
