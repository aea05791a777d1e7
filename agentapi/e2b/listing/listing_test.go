package listing

import (
	"encoding/base64"
	"errors"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/nsbox/nsbox/daemon/errdefs"
)

func mustParse(t *testing.T, raw string) Query {
	t.Helper()
	v, err := url.ParseQuery(raw)
	if err != nil {
		t.Fatal(err)
	}
	q, err := Parse(v)
	if err != nil {
		t.Fatalf("Parse(%q): %v", raw, err)
	}
	return q
}

func TestParseRefuses(t *testing.T) {
	desc := token(time.Unix(5, 0), "a", false)
	for _, tc := range []struct{ name, query, field string }{
		{"unknown state", "state=running,pausing", "state"},
		{"zero limit", "limit=0", "limit"},
		{"limit above 100", "limit=101", "limit"},
		{"limit not a number", "limit=x", "limit"},
		{"unknown order", "order=newest", "order"},
		{"bad time", "startedAfter=yesterday", "startedAfter"},
		{"token not base64", "nextToken=%25%25", "nextToken"},
		{"token without id", "nextToken=" + base64.URLEncoding.EncodeToString([]byte("2026-01-01T00:00:00Z")), "nextToken"},
		{"token with a bad direction", "nextToken=" + base64.URLEncoding.EncodeToString([]byte("2026-01-01T00:00:00Z__a__up")), "nextToken"},
		{"token with a bad time", "nextToken=" + base64.URLEncoding.EncodeToString([]byte("noon__a")), "nextToken"},
		{"descending token on an ascending list", "order=asc&nextToken=" + desc, "nextToken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Parse(v)
			var fe *errdefs.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("Parse(%q) = %v, want an invalid-argument error on %s", tc.query, err, tc.field)
			}
		})
	}
}

func TestParseReads(t *testing.T) {
	// As the JS SDK sends it: state comma-separated, metadata's pairs
	// encoded, then the parameter encoded again.
	meta := url.Values{"a b": {"x&y"}, "k": {"v"}}.Encode()
	q := mustParse(t, "state=running,paused&limit=7&order=asc&template=base&startedAfter=2026-11-27T10:00:00.5Z&metadata="+url.QueryEscape(meta))
	if !slices.Equal(q.States, []string{"running", "paused"}) || q.Limit != 7 || !q.Asc || q.Template != "base" ||
		!q.After.Equal(time.Date(2026, 11, 27, 10, 0, 0, 5e8, time.UTC)) || q.Metadata["a b"] != "x&y" || q.Metadata["k"] != "v" {
		t.Fatalf("%+v", q)
	}
	if q := mustParse(t, ""); q.Limit != DefaultLimit || q.Asc || q.States != nil || q.cursor != nil {
		t.Fatalf("defaults: %+v", q)
	}
}

func TestTokenIsE2BsCursor(t *testing.T) {
	at := time.Date(2026, 11, 27, 10, 0, 0, 123456789, time.UTC)
	for asc, want := range map[bool]string{false: "2026-11-27T10:00:00.123456789Z__ib1", true: "2026-11-27T10:00:00.123456789Z__ib1__asc"} {
		b, err := base64.URLEncoding.DecodeString(token(at, "ib1", asc))
		if err != nil || string(b) != want {
			t.Errorf("asc=%v: %q %v, want %q", asc, b, err, want)
		}
		c, gotAsc, err := parseToken(token(at, "ib1", asc))
		if err != nil || gotAsc != asc || !c.at.Equal(at) || c.id != "ib1" {
			t.Errorf("asc=%v: round trip %+v %v %v", asc, c, gotAsc, err)
		}
	}
}

func TestMatch(t *testing.T) {
	t0 := time.Unix(100, 0)
	e := Entry{ID: "a", State: "paused", Started: t0, Template: "base", Metadata: map[string]string{"k": "v", "o": "p"}}
	for _, tc := range []struct {
		q    Query
		want bool
	}{
		{Query{}, true},
		{Query{States: []string{"running", "paused"}}, true},
		{Query{States: []string{"running"}}, false},
		{Query{Template: "base"}, true},
		{Query{Template: "other"}, false},
		{Query{After: t0}, true},
		{Query{After: t0.Add(time.Millisecond)}, false},
		{Query{Metadata: map[string]string{"k": "v"}}, true},
		{Query{Metadata: map[string]string{"k": "v", "o": "q"}}, false},
		{Query{Metadata: map[string]string{"missing": ""}}, false},
	} {
		if got := tc.q.Match(e); got != tc.want {
			t.Errorf("%+v: Match = %v, want %v", tc.q, got, tc.want)
		}
	}
}

type item struct {
	id string
	at time.Time
}

func key(it item) (time.Time, string) { return it.at, it.id }

// walk reads every page of items with the query raw, as a client does:
// each next page's request carries the previous answer's token.
func walk(t *testing.T, raw string, items []item) (ids []string, pages int) {
	t.Helper()
	next := ""
	for {
		r := raw
		if next != "" {
			r += "&nextToken=" + next
		}
		page, tok := Page(mustParse(t, r), slices.Clone(items), key)
		pages++
		for _, it := range page {
			ids = append(ids, it.id)
		}
		if tok == "" {
			return ids, pages
		}
		if pages > len(items)+1 {
			t.Fatalf("%q: more pages than items: %v", raw, ids)
		}
		next = tok
	}
}

func TestPageOrderAndCursor(t *testing.T) {
	t0 := time.Unix(1000, 0)
	// Three share a start time: the id breaks the tie.
	items := []item{{"c", t0}, {"a", t0.Add(time.Second)}, {"e", t0}, {"b", t0.Add(2 * time.Second)}, {"d", t0}}
	for _, tc := range []struct {
		query string
		want  []string
		pages int
	}{
		{"", []string{"b", "a", "c", "d", "e"}, 1},
		{"order=desc&limit=1", []string{"b", "a", "c", "d", "e"}, 5},
		{"limit=2", []string{"b", "a", "c", "d", "e"}, 3},
		{"order=asc&limit=1", []string{"e", "d", "c", "a", "b"}, 5},
		{"order=asc&limit=3", []string{"e", "d", "c", "a", "b"}, 2},
		{"limit=5", []string{"b", "a", "c", "d", "e"}, 1},
	} {
		got, pages := walk(t, tc.query, items)
		if !slices.Equal(got, tc.want) || pages != tc.pages {
			t.Errorf("%q: %v in %d pages, want %v in %d", tc.query, got, pages, tc.want, tc.pages)
		}
	}
}

// TestPageSurvivesChanges: a sandbox created or killed between two pages
// neither repeats nor hides the others (an offset would do both).
func TestPageSurvivesChanges(t *testing.T) {
	t0 := time.Unix(1000, 0)
	items := []item{{"a", t0}, {"b", t0.Add(time.Second)}, {"c", t0.Add(2 * time.Second)}}
	first, next := Page(mustParse(t, "limit=1"), slices.Clone(items), key)
	if len(first) != 1 || first[0].id != "c" || next == "" {
		t.Fatalf("first page %v %q", first, next)
	}
	// c is killed, a newer d appears.
	changed := []item{{"a", t0}, {"b", t0.Add(time.Second)}, {"d", t0.Add(3 * time.Second)}}
	second, next := Page(mustParse(t, "limit=1&nextToken="+next), changed, key)
	if len(second) != 1 || second[0].id != "b" || next == "" {
		t.Fatalf("second page %v %q, want b and a token", second, next)
	}
	third, next := Page(mustParse(t, "limit=1&nextToken="+next), changed, key)
	if len(third) != 1 || third[0].id != "a" || next != "" {
		t.Fatalf("third page %v %q, want a and no token", third, next)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("state=running&limit=1&nextToken=" + token(time.Unix(1, 0), "x", false))
	f.Add("order=asc&metadata=a%3Db&nextToken=" + token(time.Unix(1, 0), "x", true))
	f.Add("nextToken=" + base64.URLEncoding.EncodeToString([]byte("__")))
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := Parse(v)
		if err != nil {
			return
		}
		if q.Limit < 1 || q.Limit > MaxLimit {
			t.Fatalf("limit %d accepted", q.Limit)
		}
		items := []item{{"a", time.Unix(1, 0)}, {"b", time.Unix(2, 0)}}
		if page, _ := Page(q, items, key); len(page) > q.Limit {
			t.Fatalf("%d items on a page of %d", len(page), q.Limit)
		}
	})
}
