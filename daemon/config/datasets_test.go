package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestDatasets(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("[[datasets]]\nname = \"census\"\npath = %q\n\n[[datasets]]\nname = \"maps\"\npath = %q\n", dir, dir)
	cfg, err := Load(writeConf(t, conf), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Dataset{{Name: "census", Path: dir}, {Name: "maps", Path: dir}}
	if !reflect.DeepEqual(cfg.Datasets, want) {
		t.Errorf("datasets %+v, want %+v", cfg.Datasets, want)
	}
	base, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if keys := base.RestartKeys(cfg); !reflect.DeepEqual(keys, []string{"datasets"}) {
		t.Errorf("restart keys %q, want [datasets]", keys)
	}

	for _, tc := range []struct {
		name, conf string
		want       []string // "LINE key" per error
		msg        string
	}{
		{"missing dir", "[[datasets]]\nname = \"a\"\npath = \"" + dir + "/nope\"\n", []string{"3 datasets[0].path"}, "must exist when the daemon starts"},
		{"a file", "[[datasets]]\nname = \"a\"\npath = \"" + file + "\"\n", []string{"3 datasets[0].path"}, "not a directory"},
		{"relative", "[[datasets]]\nname = \"a\"\npath = \"data\"\n", []string{"3 datasets[0].path"}, "must be absolute"},
		{"bad name", "[[datasets]]\nname = \"../etc\"\npath = \"" + dir + "\"\n", []string{"2 datasets[0].name"}, "mount name"},
		{"no name", "[[datasets]]\npath = \"" + dir + "\"\n", []string{"0 datasets[0].name"}, "has no name"},
		{"twice", "[[datasets]]\nname = \"a\"\npath = \"" + dir + "\"\n[[datasets]]\nname = \"a\"\npath = \"" + dir + "\"\n", []string{"5 datasets[1].name"}, "declared twice"},
		{"unknown key", "[[datasets]]\nname = \"a\"\npath = \"" + dir + "\"\nmode = \"rw\"\n", []string{"4 datasets[0].mode"}, "has name and path"},
		{"a table", "[datasets]\nname = \"a\"\n", []string{"1 datasets"}, "unknown table"},
		{"other array", "[[volumes]]\nname = \"a\"\n", []string{"1 volumes"}, "[[datasets]]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(writeConf(t, tc.conf), nil)
			if got := errorLines(t, err); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("errors:\n%s\ngot  %q\nwant %q", err, got, tc.want)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error does not say %q:\n%s", tc.msg, err)
			}
		})
	}
}
