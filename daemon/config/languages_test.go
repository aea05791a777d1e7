package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/policy"
)

func TestLanguages(t *testing.T) {
	c, err := Load(writeConf(t, `
[languages.octave]
argv = ["octave", "{file}"]
extension = ".m"
rootfs = ["default"]

[languages.awk]
argv = ["awk", "-f", "{file}"]

[languages.py-stdin]
argv = ["python3", "-"]
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.New(c.Policy())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(pol.Languages("default"), ","); got != "python,bash,awk,octave,py-stdin" {
		t.Errorf("languages on default: %s", got)
	}
	if got := strings.Join(pol.Languages("minimal"), ","); got != "python,bash,awk,py-stdin" {
		t.Errorf("languages on minimal: %s", got)
	}
	j, err := pol.Validate(&agentapi.RunRequest{Language: "octave", Code: "disp(42)", Rootfs: "default"})
	if err != nil {
		t.Fatal(err)
	}
	sp := j.Spec("id", "/dir")
	if strings.Join(sp.Argv, " ") != "octave /workspace/.nsbox/main.m" || len(sp.Files) != 1 || sp.Files[0].Path != ".nsbox/main.m" || string(sp.Files[0].Data) != "disp(42)" || sp.Stdin != nil {
		t.Errorf("spec %+v", sp)
	}
	j, err = pol.Validate(&agentapi.RunRequest{Language: "py-stdin", Code: "print(1)"})
	if err != nil {
		t.Fatal(err)
	}
	if sp := j.Spec("id", "/dir"); strings.Join(sp.Argv, " ") != "python3 -" || sp.Stdin == nil || len(sp.Files) != 0 {
		t.Errorf("stdin spec %+v", sp)
	}
	for _, c := range []struct {
		req  agentapi.RunRequest
		want string
	}{
		{agentapi.RunRequest{Language: "octave", Code: "1", Rootfs: "minimal"}, `"octave" is declared for rootfs default only; rootfs "minimal" has python, bash, awk, py-stdin`},
		{agentapi.RunRequest{Language: "cobol", Code: "1"}, `"cobol" is not a language of this daemon; rootfs "default" has python, bash, awk, octave, py-stdin`},
		{agentapi.RunRequest{Language: "py-stdin", Code: "1", Stdin: "x"}, "reads its program from standard input"},
	} {
		_, err := pol.Validate(&c.req)
		var fe *errdefs.FieldError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want a field error with %q", c.req, err, c.want)
		}
	}
}

func TestLanguagesConfigErrors(t *testing.T) {
	for _, c := range []struct{ conf, want string }{
		{"[languages.python]\nargv = [\"python3\"]\n", "built in"},
		{"[languages.Bad]\nargv = [\"x\"]\n", "language name"},
		{"[languages.x]\nextension = \".x\"\n", "argv is empty"},
		{"[languages.x]\nargv = [\"x\"]\nextension = \"x\"\n", "starting with a dot"},
		{"[languages.x]\nargv = [\"x\"]\ncolour = 1\n", "has argv, rootfs and extension"},
	} {
		_, err := Load(writeConf(t, c.conf), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error with %q", c.conf, err, c.want)
		}
	}
}
