// Package tomlval reads typed values from go-toml's unstable parser nodes
// for daemon/config and its section packages: each reader's error says
// what it wanted and what the file gave, for the caller to report with the
// key's line.
package tomlval

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/nsbox/nsbox/agentapi/limits"
)

// String reads a string.
func String(v *unstable.Node) (string, error) {
	if v.Kind != unstable.String {
		return "", fmt.Errorf("want a string in quotes, got a TOML %s", KindName(v.Kind))
	}
	return string(v.Data), nil
}

// Int reads an integer (underscores and 0x, 0o, 0b prefixes allowed).
func Int(v *unstable.Node) (int64, error) {
	if v.Kind != unstable.Integer {
		return 0, fmt.Errorf("want an integer, got a TOML %s", KindName(v.Kind))
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(string(v.Data), "_", ""), 0, 64)
	if err != nil {
		return 0, fmt.Errorf("integer %s: %w", v.Data, err)
	}
	return n, nil
}

// IntIn reads an integer from lo to hi; what, when not "", says what
// lo means ("(no pool)").
func IntIn(v *unstable.Node, lo, hi int64, what string) (int64, error) {
	n, err := Int(v)
	if err == nil && (n < lo || n > hi) {
		low := strconv.FormatInt(lo, 10)
		if what != "" {
			low += " " + what
		}
		err = fmt.Errorf("%d: must be between %s and %d", n, low, hi)
	}
	return n, err
}

// Float reads a finite number, integer or float.
func Float(v *unstable.Node) (float64, error) {
	switch v.Kind {
	case unstable.Integer:
		n, err := Int(v)
		return float64(n), err
	case unstable.Float:
		f, err := strconv.ParseFloat(strings.ReplaceAll(string(v.Data), "_", ""), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return 0, fmt.Errorf("%s is not a finite number", v.Data)
		}
		return f, nil
	}
	return 0, fmt.Errorf("want a number, got a TOML %s", KindName(v.Kind))
}

// Size reads a byte count: an integer, or a string like "512M" or "1GiB".
func Size(v *unstable.Node) (int64, error) {
	switch v.Kind {
	case unstable.Integer:
		n, err := Int(v)
		if err == nil && n < 0 {
			err = fmt.Errorf("%d is negative", n)
		}
		return n, err
	case unstable.String:
		return limits.ParseSize(string(v.Data))
	}
	return 0, fmt.Errorf("want a size like \"512M\" or a number of bytes, got a TOML %s", KindName(v.Kind))
}

// Duration reads a positive duration string like "30s".
func Duration(v *unstable.Node) (time.Duration, error) {
	if v.Kind != unstable.String {
		return 0, fmt.Errorf("want a duration string like \"30s\" or \"5m\", got a TOML %s", KindName(v.Kind))
	}
	d, err := time.ParseDuration(string(v.Data))
	if err != nil {
		return 0, fmt.Errorf("want a duration like \"30s\" or \"5m\": %w", err)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%v: must be positive", d)
	}
	return d, nil
}

// KindName names a TOML value's kind for messages ("string", "array").
func KindName(k unstable.Kind) string {
	switch k {
	case unstable.String:
		return "string"
	case unstable.Integer:
		return "integer"
	case unstable.Float:
		return "float"
	case unstable.Bool:
		return "boolean"
	case unstable.Array:
		return "array"
	case unstable.InlineTable:
		return "table"
	}
	return "date/time"
}

// Strings reads a list of strings (or one comma-separated string).
func Strings(v *unstable.Node, example string) ([]string, error) {
	switch v.Kind {
	case unstable.String:
		return SplitList(string(v.Data)), nil
	case unstable.Array:
		var out []string
		it := v.Children()
		for it.Next() {
			s, err := String(it.Node())
			if err != nil {
				return nil, fmt.Errorf("list: %w", err)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a list of strings like %s, got a TOML %s", example, KindName(v.Kind))
}

// SplitList splits a comma-separated list, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
