package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/daemon/config/internal/tomlval"
)

// Dataset is one [[datasets]] entry: a host directory the operator lets
// runs and sessions read, by name, at /mnt/NAME (read-only, idmapped).
type Dataset struct {
	Name string
	Path string // absolute host directory; must exist at daemon start
}

// datasetKey is the key of entry i's field, as errors and lines name it.
func datasetKey(i int, field string) string {
	return "datasets[" + strconv.Itoa(i) + "]." + field
}

// setDatasetKey stores a key of the i-th [[datasets]] entry.
func (cfg *Config) setDatasetKey(i int, key string, v *unstable.Node) error {
	d := &cfg.Datasets[i]
	switch key {
	case "name":
		s, err := tomlval.String(v)
		if err != nil {
			return err
		}
		if err := container.ValidMountName(s); err != nil {
			return fmt.Errorf("dataset %w", err)
		}
		d.Name = s
	case "path":
		s, err := tomlval.String(v)
		if err != nil {
			return err
		}
		d.Path = s
	default:
		return fmt.Errorf("unknown key; [[datasets]] has name and path")
	}
	return nil
}

// checkDatasets finds what is wrong with the declared datasets: each needs
// a name (unique) and an absolute path to an existing directory.
func (cfg *Config) checkDatasets(bad func(key, format string, args ...any)) {
	seen := map[string]int{}
	for i, d := range cfg.Datasets {
		switch {
		case d.Name == "" && cfg.isSet(datasetKey(i, "name")):
			// set, and refused as it was read
		case d.Name == "":
			bad(datasetKey(i, "name"), "[[datasets]] entry %d has no name", i+1)
		case seen[d.Name] > 0:
			bad(datasetKey(i, "name"), "dataset %q declared twice (first in entry %d)", d.Name, seen[d.Name])
		default:
			seen[d.Name] = i + 1
		}
		if d.Path == "" {
			bad(datasetKey(i, "path"), "dataset %q has no path", d.Name)
			continue
		}
		if !filepath.IsAbs(d.Path) {
			bad(datasetKey(i, "path"), "dataset %q: path %q must be absolute", d.Name, d.Path)
			continue
		}
		st, err := os.Stat(d.Path)
		switch {
		case err != nil:
			bad(datasetKey(i, "path"), "dataset %q: %v (the directory must exist when the daemon starts)", d.Name, err)
		case !st.IsDir():
			bad(datasetKey(i, "path"), "dataset %q: %s is not a directory", d.Name, d.Path)
		}
	}
}

// datasetsString is the datasets as a restart-key comparison sees them.
func datasetsString(ds []Dataset) string {
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "%s=%s;", d.Name, d.Path)
	}
	return b.String()
}
