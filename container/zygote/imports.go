package zygote

import (
	"slices"
	"strings"
)

// Imports returns the top-level modules Python code imports by statement
// (import a.b as c, from a.b import c; relative imports are not modules
// of their own), sorted and without repeats: [] for code that imports
// nothing. It returns nil, unknown, for code that imports by call
// (__import__, importlib.import_module) or does not tokenize. It reads
// tokens, not a syntax tree: an import in a string or a comment is not
// one, and a statement that is never reached counts. The result only
// routes a run among zygotes (Set), so a wrong guess costs time, never
// isolation.
func Imports(code string) []string {
	toks, ok := pyTokens(code)
	if !ok {
		return nil
	}
	mods := []string{}
	start := true // at the start of a statement
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t == "__import__" || t == "import_module":
			return nil
		case start && t == "from":
			if i+1 < len(toks) && isName(toks[i+1]) {
				mods = append(mods, toks[i+1])
			}
		case start && t == "import":
			// import a.b as c, d: the names after import and after each
			// comma at this statement's level.
			for j := i + 1; j < len(toks) && isName(toks[j]); {
				mods = append(mods, toks[j])
				for j++; j < len(toks) && toks[j] != "," && !endsStatement(toks[j]); j++ {
				}
				if j >= len(toks) || toks[j] != "," {
					break
				}
				j++
			}
		}
		start = endsStatement(t) || t == ":"
	}
	slices.Sort(mods)
	return slices.Compact(mods)
}

func endsStatement(t string) bool { return t == "\n" || t == ";" }

func isName(t string) bool {
	return t != "" && (t[0] == '_' || t[0] >= 0x80 || 'a' <= t[0]|0x20 && t[0]|0x20 <= 'z')
}

// pyTokens splits Python source into names (a dotted name's first part
// only is kept whole: "a.b" gives "a", ".", "b"), single-character
// operators and "\n" at the end of each logical line. Strings, numbers
// and comments are dropped. ok is false for an unterminated string.
func pyTokens(src string) (toks []string, ok bool) {
	depth := 0 // brackets open: newlines inside do not end a line
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '\\' && i+1 < len(src) && src[i+1] == '\n':
			i += 2
		case c == '\n':
			if depth == 0 && len(toks) > 0 && toks[len(toks)-1] != "\n" {
				toks = append(toks, "\n")
			}
			i++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f':
			i++
		case c == '\'' || c == '"':
			n, good := stringLen(src[i:])
			if !good {
				return nil, false
			}
			i += n
		case isName(src[i:]):
			j := i
			for j < len(src) && (isName(src[j:]) || '0' <= src[j] && src[j] <= '9') {
				j++
			}
			word := src[i:j]
			// A string prefix (r, b, f, u and their pairs) right before a quote.
			if j < len(src) && (src[j] == '\'' || src[j] == '"') && len(word) <= 2 && strings.Trim(strings.ToLower(word), "rbfu") == "" {
				n, good := stringLen(src[j:])
				if !good {
					return nil, false
				}
				i = j + n
				continue
			}
			toks = append(toks, word)
			i = j
		case '0' <= c && c <= '9':
			for i < len(src) && (isName(src[i:]) || '0' <= src[i] && src[i] <= '9' || src[i] == '.') {
				i++
			}
		default:
			switch c {
			case '(', '[', '{':
				depth++
			case ')', ']', '}':
				depth = max(depth-1, 0)
			}
			toks = append(toks, src[i:i+1])
			i++
		}
	}
	return toks, true
}

// stringLen is the length of the string literal at the start of s (its
// opening quote), triple-quoted or not. A backslash skips the next
// character in raw strings too: r"\"" does not end at the second quote.
func stringLen(s string) (int, bool) {
	q := s[:1]
	if strings.HasPrefix(s, q+q+q) {
		q = q + q + q
	} else if strings.HasPrefix(s, q+q) {
		return 2, true // the empty string
	}
	for i := len(q); i < len(s); i++ {
		switch {
		case s[i] == '\\':
			i++
		case len(q) == 1 && s[i] == '\n':
			return 0, false
		case strings.HasPrefix(s[i:], q):
			return i + len(q), true
		}
	}
	return 0, false
}
