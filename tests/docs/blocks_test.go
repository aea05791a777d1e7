package docs

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// A block is one fenced sample of a markdown file that the runner can run.
type block struct {
	File      string // as the repository names it: README.md, docs/API.md
	Line      int    // the opening fence's line
	Lang      string // sh, bash, console or python
	Text      string
	Skip      string   // why it cannot run here, from a skip marker
	Before    []string // shell run first, in the same directory, from before markers
	OwnDaemon bool     // the block starts a daemon of its own
	CatFiles  bool     // a console block's `cat FILE` shows the file: its output is written to FILE first
	Needs     []string // untracked paths of the checkout the block needs (what make deps installs)
	Venv      bool     // runs with a fresh venv's bin first on PATH: pip installs there, not into the host's Python
}

func (b block) Name() string { return filepath.Base(b.File) + ":" + strconv.Itoa(b.Line) }

// runnable are the fences the runner runs; the others (json, toml, js, go)
// are formats and snippets for other tools, counted apart.
var runnable = map[string]bool{"sh": true, "bash": true, "console": true, "python": true}

var (
	fenceRE  = regexp.MustCompile("^\\s*```\\s*([A-Za-z0-9_+-]*)")
	markerRE = regexp.MustCompile(`^<!--\s*docs-test:\s*(.*?)\s*-->\s*$`)
)

// parseMarkdown returns the runnable blocks of a markdown file and the
// number of fenced blocks of other kinds. A marker is an HTML comment
// on a line of its own right above the fence (several may stack):
//
//	<!-- docs-test: skip (REASON) -->    listed as skipped, with REASON
//	<!-- docs-test: before: SHELL -->    SHELL runs first, in the block's directory
//	<!-- docs-test: own daemon -->       no daemon answers on /run/nsbox/nsbox.sock: the block starts one
//	<!-- docs-test: cat shows the file -->  in a console block, `# cat FILE` and the lines after it
//	                                        show a file: they are written to FILE before the cat
//	<!-- docs-test: needs PATH -->       PATH, untracked (node_modules that make deps installs), is
//	                                     linked into the block's copy; without it the block is skipped
//	<!-- docs-test: in a venv -->        a fresh venv's bin is first on PATH (pip installs into it,
//	                                     not into the host's Python, which Debian's pip refuses as well)
//
// A marker that is none of these, or that no runnable fence follows, is an
// error, so that a typo cannot quietly change what runs.
func parseMarkdown(name, text string) (blocks []block, others int, err error) {
	var (
		pending     []string // markers waiting for their fence
		pendingLine int
		cur         *block
		indent      string // the open fence's, taken off its lines (a fence in a list item)
		body        strings.Builder
	)
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		m := fenceRE.FindStringSubmatch(line)
		if cur != nil {
			if m != nil && m[1] == "" {
				cur.Text = body.String()
				blocks = append(blocks, *cur)
				cur = nil
				body.Reset()
			} else {
				body.WriteString(strings.TrimPrefix(line, indent) + "\n")
			}
			continue
		}
		if mm := markerRE.FindStringSubmatch(strings.TrimSpace(line)); mm != nil {
			if len(pending) == 0 {
				pendingLine = n
			}
			pending = append(pending, mm[1])
			continue
		}
		if m == nil {
			if len(pending) > 0 {
				return nil, 0, fmt.Errorf("%s:%d: docs-test marker not right above a fence", name, pendingLine)
			}
			continue
		}
		if !runnable[m[1]] {
			if len(pending) > 0 {
				return nil, 0, fmt.Errorf("%s:%d: docs-test marker above a %q fence, which the runner does not run", name, pendingLine, m[1])
			}
			others++
			if err := skipFence(sc, &n); err != nil {
				return nil, 0, fmt.Errorf("%s:%d: %v", name, n, err)
			}
			continue
		}
		cur = &block{File: name, Line: n, Lang: m[1]}
		indent = line[:len(line)-len(strings.TrimLeft(line, " \t"))]
		for _, p := range pending {
			switch {
			case strings.HasPrefix(p, "skip (") && strings.HasSuffix(p, ")"):
				cur.Skip = strings.TrimSuffix(strings.TrimPrefix(p, "skip ("), ")")
			case strings.HasPrefix(p, "before:"):
				cur.Before = append(cur.Before, strings.TrimSpace(strings.TrimPrefix(p, "before:")))
			case strings.HasPrefix(p, "needs ") && !strings.Contains(p, ".."):
				cur.Needs = append(cur.Needs, strings.TrimPrefix(p, "needs "))
			case p == "in a venv":
				cur.Venv = true
			case p == "own daemon":
				cur.OwnDaemon = true
			case p == "cat shows the file" && m[1] == "console":
				cur.CatFiles = true
			default:
				return nil, 0, fmt.Errorf("%s:%d: unknown docs-test marker %q above a %s fence (skip (REASON), before: SHELL, own daemon, needs PATH, in a venv, cat shows the file in a console)", name, pendingLine, p, m[1])
			}
		}
		pending = nil
	}
	if cur != nil {
		return nil, 0, fmt.Errorf("%s:%d: fence not closed", name, cur.Line)
	}
	if len(pending) > 0 {
		return nil, 0, fmt.Errorf("%s:%d: docs-test marker at the end of the file", name, pendingLine)
	}
	return blocks, others, sc.Err()
}

// skipFence reads past a fence the runner does not run.
func skipFence(sc *bufio.Scanner, n *int) error {
	for sc.Scan() {
		*n++
		if m := fenceRE.FindStringSubmatch(sc.Text()); m != nil && m[1] == "" {
			return nil
		}
	}
	return fmt.Errorf("fence not closed")
}

// docFiles are README.md and docs/*.md under root, as the repository names them.
func docFiles(root string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	out := []string{"README.md"}
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		out = append(out, rel)
	}
	return out, nil
}

// allBlocks parses every doc file under root.
func allBlocks(root string) (blocks []block, others int, err error) {
	files, err := docFiles(root)
	if err != nil {
		return nil, 0, err
	}
	for _, f := range files {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, 0, err
		}
		b, o, err := parseMarkdown(f, string(text))
		if err != nil {
			return nil, 0, err
		}
		blocks, others = append(blocks, b...), others+o
	}
	return blocks, others, nil
}

func TestParseMarkdown(t *testing.T) {
	md := "text\n" +
		"```sh\necho a\n```\n" +
		"```json\n{\"sh\": 1}\n```\n" +
		"<!-- docs-test: skip (needs systemd) -->\n" +
		"```sh\nsystemctl restart nsbox\n```\n" +
		"<!-- docs-test: before: touch x -->\n<!-- docs-test: own daemon -->\n<!-- docs-test: needs a/node_modules -->\n<!-- docs-test: in a venv -->\n" +
		"```console\n# cat x\n```\n" +
		"- item\n\n  ```python\n  if 1:\n      print(1)\n  ```\n"
	blocks, others, err := parseMarkdown("docs/X.md", md)
	if err != nil {
		t.Fatal(err)
	}
	if others != 1 || len(blocks) != 4 {
		t.Fatalf("others %d, blocks %+v", others, blocks)
	}
	want := []block{
		{File: "docs/X.md", Line: 2, Lang: "sh", Text: "echo a\n"},
		{File: "docs/X.md", Line: 9, Lang: "sh", Text: "systemctl restart nsbox\n", Skip: "needs systemd"},
		{File: "docs/X.md", Line: 16, Lang: "console", Text: "# cat x\n", Before: []string{"touch x"}, OwnDaemon: true, Needs: []string{"a/node_modules"}, Venv: true},
		{File: "docs/X.md", Line: 21, Lang: "python", Text: "if 1:\n    print(1)\n"},
	}
	for i, w := range want {
		g := blocks[i]
		if g.File != w.File || g.Line != w.Line || g.Lang != w.Lang || g.Text != w.Text || g.Skip != w.Skip ||
			strings.Join(g.Before, ";") != strings.Join(w.Before, ";") || g.OwnDaemon != w.OwnDaemon || g.Venv != w.Venv ||
			strings.Join(g.Needs, ";") != strings.Join(w.Needs, ";") {
			t.Errorf("block %d: got %+v, want %+v", i, g, w)
		}
	}
	if blocks[0].Name() != "X.md:2" {
		t.Errorf("name %q", blocks[0].Name())
	}
	for _, bad := range []string{
		"<!-- docs-test: skipp (x) -->\n```sh\ntrue\n```\n",
		"<!-- docs-test: skip (x) -->\n\n```sh\ntrue\n```\n",
		"<!-- docs-test: skip (x) -->\n```json\n{}\n```\n",
		"```sh\ntrue\n",
	} {
		if _, _, err := parseMarkdown("y.md", bad); err == nil {
			t.Errorf("no error for %q", bad)
		}
	}
}

// TestDocsParse holds every doc file to the marker grammar, without root.
func TestDocsParse(t *testing.T) {
	if _, _, err := allBlocks(repoRoot(t)); err != nil {
		t.Fatal(err)
	}
}

func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestConsoleScript runs transcripts' scripts in bash: a command must exit
// with the status its output notes and print the lines it shows, and a
// shown file is written first.
func TestConsoleScript(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text string
		catFiles   bool
		ok         bool
	}{
		{"zero", "# true\n", false, true},
		{"nonzero unnoted", "# false\n", false, false},
		{"nonzero noted", "# echo whatever; false\nwhatever          # exit status 1\n", false, true},
		{"noted but zero", "# true\nout          # exit status 3\n", false, false},
		{"cat without marker", "# cat " + dir + "/a/f\nx = 1\n", false, false},
		{"cat shows the file", "# cat " + dir + "/b/f\nx = 1\n# grep -qx 'x = 1' " + dir + "/b/f\n", true, true},
		{"output shown", "# sh -c 'echo nsbox: timeout; exit 124'\nnsbox: timeout            # exit status 124\n", false, true},
		{"output differs", "# sh -c 'echo nsbox: time out; exit 124'\nnsbox: timeout            # exit status 124\n", false, false},
		{"output elided or JSON", "# echo '{\"a\": 1}'; echo 3.11.2\n{\"a\":1}\n3.9 (…)\n", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command("bash", "-c", consoleScript(tc.text, tc.catFiles)).CombinedOutput()
			if (err == nil) != tc.ok {
				t.Errorf("ran with %v, want ok=%v\n%s", err, tc.ok, out)
			}
		})
	}
}
