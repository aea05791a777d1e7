package runner

import (
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/internal/testenv"
)

// TestAllowedImports: with an allowlist, every way a cell's own code can
// import a module outside it raises ImportError naming the list, while
// allowed modules (and what they import themselves) load, and the
// runner's own imports (figures, its protocol) are not affected.
func TestAllowedImports(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.Rootfs(t))
	allowed := []string{"json", "decimal", "importlib", "collections.abc"}
	tests := []struct {
		name, code string
		refused    string // the module named in the ImportError; "" if the cell must succeed
		value      string
	}{
		{name: "allowed", code: "import json; json.dumps([1])", value: "'[1]'"},
		{name: "allowed submodule", code: "import json.decoder; json.decoder.JSONDecoder.__name__", value: "'JSONDecoder'"},
		{name: "allowed module imports freely", code: "import decimal; str(decimal.Decimal(1) / 4)", value: "'0.25'"},
		{name: "import statement", code: "import os", refused: "os"},
		{name: "already loaded module", code: "import sys", refused: "sys"},
		{name: "submodule of a refused one", code: "import os.path", refused: "os.path"},
		{name: "from import", code: "from os import path", refused: "os"},
		{name: "subprocess", code: "import subprocess", refused: "subprocess"},
		{name: "socket", code: "import socket", refused: "socket"},
		{name: "__import__", code: "__import__('os')", refused: "os"},
		{name: "importlib.import_module", code: "import importlib; importlib.import_module('socket')", refused: "socket"},
		{name: "importlib of an allowed one", code: "import importlib; importlib.import_module('json').__name__", value: "'json'"},
		{name: "exec in the cell's globals", code: "exec('import os')", refused: "os"},
		{name: "exec in a fresh dict", code: "exec('import os', {})", refused: "os"},
		{name: "function defined in a cell", code: "def f():\n    import socket\nf()", refused: "socket"},
		{name: "parent of an allowed submodule", code: "import collections", refused: "collections"},
		{name: "allowed submodule only", code: "from collections import abc; abc.Mapping.__name__", value: "'Mapping'"},
		{name: "still alive", code: "1 + 1", value: "2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := execReq(t, r, ExecRequest{Code: tc.code, Timeout: time.Minute, AllowedImports: allowed})
			if tc.refused == "" {
				if res.Status != StatusOK || res.Value != tc.value {
					t.Fatalf("status %q value %q exception %+v; want ok %q", res.Status, res.Value, res.Exception, tc.value)
				}
				return
			}
			e := res.Exception
			if res.Status != StatusException || e == nil || e.Name != "ImportError" {
				t.Fatalf("status %q exception %+v; want ImportError", res.Status, e)
			}
			want := "import of '" + tc.refused + "' is not allowed: allowed_imports is ['json', 'decimal', 'importlib', 'collections.abc']"
			if e.Value != want {
				t.Errorf("message %q, want %q", e.Value, want)
			}
			if strings.Contains(e.Traceback, "nsbox-runner") {
				t.Errorf("traceback shows runner frames:\n%s", e.Traceback)
			}
		})
	}
}

// TestNoImportsAllowed: an empty list allows no import at all, and no
// list leaves imports free.
func TestNoImportsAllowed(t *testing.T) {
	e := newEngine(t)
	r := startRunner(t, e, testenv.Rootfs(t))
	res := execReq(t, r, ExecRequest{Code: "import json", Timeout: time.Minute, AllowedImports: []string{}})
	if res.Exception == nil || res.Exception.Name != "ImportError" || !strings.HasSuffix(res.Exception.Value, "allowed_imports is []") {
		t.Fatalf("an empty list: status %q exception %+v; want ImportError", res.Status, res.Exception)
	}
	free := startRunner(t, e, testenv.Rootfs(t))
	if res := exec(t, free, "import os, socket, subprocess; os.sep"); res.Status != StatusOK || res.Value != "'/'" {
		t.Fatalf("no list: status %q value %q exception %+v", res.Status, res.Value, res.Exception)
	}
}
