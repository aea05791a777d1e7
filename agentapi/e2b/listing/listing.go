// Package listing reads the query of E2B's sandbox list (GET /v2/sandboxes)
// and pages its answer as E2B's API does: filters by state, metadata, start
// time and template; newest first unless order=asc; at most limit (1 to
// 100, default 100) per page, the next page named by an opaque token the
// caller sends back as nextToken and the server sends as X-Next-Token.
//
// The token is E2B's keyset cursor (e2b-dev/infra, packages/api/internal/
// utils/pagination.go): base64url of "<RFC 3339 start time>__<sandbox id>",
// with "__asc" appended for ascending pages. A page holds the sandboxes after
// the cursor in the list's order, so a sandbox created or killed between two
// pages neither shifts nor repeats the others (an offset would).
package listing

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nsbox/nsbox/daemon/errdefs"
)

// The page size E2B's API takes: limit defaults to and is at most 100.
const (
	DefaultLimit = 100
	MaxLimit     = 100
)

// The states a list filters on (E2B's SandboxState).
var states = []string{"running", "paused"}

// Query is a parsed list request.
type Query struct {
	States   []string          // empty: every state
	Metadata map[string]string // every pair must match
	After    time.Time         // started at or after; zero: any
	Template string            // "": any
	Asc      bool              // oldest first
	Limit    int

	cursor *cursor
}

type cursor struct {
	at time.Time
	id string
}

// Entry is what the filters and the order read of a sandbox.
type Entry struct {
	ID       string
	State    string
	Started  time.Time
	Template string
	Metadata map[string]string
}

// Parse reads a list request's query: state (comma-separated, or repeated),
// metadata ("k=v&k2=v2", each key and value URL-encoded once more),
// startedAfter (RFC 3339), template, order (asc or desc), limit and
// nextToken. A value E2B's API refuses is an errdefs.Field error (400).
func Parse(q url.Values) (Query, error) {
	out := Query{Limit: DefaultLimit}
	for _, v := range q["state"] {
		for _, st := range strings.Split(v, ",") {
			if !slices.Contains(states, st) {
				return out, errdefs.Field("state", "%q: want running or paused", st)
			}
			out.States = append(out.States, st)
		}
	}
	var err error
	if out.Metadata, err = metadataQuery(q.Get("metadata")); err != nil {
		return out, err
	}
	if v := q.Get("startedAfter"); v != "" {
		if out.After, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return out, errdefs.Field("startedAfter", "%q: want an RFC 3339 time", v)
		}
	}
	out.Template = q.Get("template")
	switch o := q.Get("order"); o {
	case "", "desc":
	case "asc":
		out.Asc = true
	default:
		return out, errdefs.Field("order", "%q: want asc or desc", o)
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxLimit {
			return out, errdefs.Field("limit", "%q: want a whole number from 1 to %d", v, MaxLimit)
		}
		out.Limit = n
	}
	if v := q.Get("nextToken"); v != "" {
		c, asc, err := parseToken(v)
		if err != nil {
			return out, errdefs.Field("nextToken", "invalid next token: %v", err)
		}
		if asc != out.Asc {
			return out, errdefs.Field("nextToken", "invalid next token: it was issued for the other order")
		}
		out.cursor = &c
	}
	return out, nil
}

// Match reports whether e passes the query's filters (not its cursor).
func (q Query) Match(e Entry) bool {
	if len(q.States) > 0 && !slices.Contains(q.States, e.State) {
		return false
	}
	if q.Template != "" && q.Template != e.Template {
		return false
	}
	if e.Started.Before(q.After) {
		return false
	}
	for k, v := range q.Metadata {
		if have, ok := e.Metadata[k]; !ok || have != v {
			return false
		}
	}
	return true
}

// Page sorts items (in place) in the query's order (start time, then id: newest
// first and ids ascending, or the exact reverse with Asc, as E2B's keyset
// is), keeps those after the query's cursor and returns at most Limit of
// them, with the token of the next page ("" when this one is the last).
func Page[T any](q Query, items []T, key func(T) (time.Time, string)) ([]T, string) {
	cmp := func(a, b T) int {
		at, aid := key(a)
		bt, bid := key(b)
		c := bt.Compare(at)
		if c == 0 {
			c = strings.Compare(aid, bid)
		}
		if q.Asc {
			return -c
		}
		return c
	}
	slices.SortStableFunc(items, cmp)
	if q.cursor != nil {
		// Sorted, the items at or before the cursor are a prefix.
		i := slices.IndexFunc(items, func(it T) bool {
			at, id := key(it)
			c := at.Compare(q.cursor.at)
			if c == 0 {
				c = strings.Compare(q.cursor.id, id)
			}
			if q.Asc {
				return c > 0
			}
			return c < 0
		})
		if i < 0 {
			i = len(items)
		}
		items = items[i:]
	}
	if len(items) <= q.Limit {
		return items, ""
	}
	items = items[:q.Limit]
	at, id := key(items[len(items)-1])
	return items, token(at, id, q.Asc)
}

func token(at time.Time, id string, asc bool) string {
	s := at.UTC().Format(time.RFC3339Nano) + "__" + id
	if asc {
		s += "__asc"
	}
	return base64.URLEncoding.EncodeToString([]byte(s))
}

func parseToken(t string) (cursor, bool, error) {
	b, err := base64.URLEncoding.DecodeString(t)
	if err != nil {
		return cursor{}, false, errors.New("not base64url")
	}
	parts := strings.Split(string(b), "__")
	if len(parts) < 2 || len(parts) > 3 || (len(parts) == 3 && parts[2] != "asc") {
		return cursor{}, false, errors.New("not <time>__<id>[__asc]")
	}
	at, err := time.Parse(time.RFC3339Nano, parts[0])
	if err != nil {
		return cursor{}, false, fmt.Errorf("its time: %w", err)
	}
	return cursor{at: at, id: parts[1]}, len(parts) == 3, nil
}

// metadataQuery parses the metadata filter: "k=v&k2=v2" with each key and
// value URL-encoded once more (the SDKs encode each, then the pairs, and
// the query parameter is encoded again on the wire).
func metadataQuery(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	v, err := url.ParseQuery(s)
	if err != nil {
		return nil, errdefs.Field("metadata", "%v", err)
	}
	out := map[string]string{}
	for k := range v {
		key, err1 := url.QueryUnescape(k)
		val, err2 := url.QueryUnescape(v.Get(k))
		if err := errors.Join(err1, err2); err != nil {
			return nil, errdefs.Field("metadata", "%v", err)
		}
		out[key] = val
	}
	return out, nil
}
