package cli

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionFromBuildInfo: the version and the revision come from the
// build information, as a go install ...@version build and a build in a
// checkout record them.
func TestVersionFromBuildInfo(t *testing.T) {
	defer func(f func() (*debug.BuildInfo, bool)) { buildInfo = f }(buildInfo)
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		want []string
		not  []string
	}{
		{"released", &debug.BuildInfo{Main: debug.Module{Path: "github.com/mandatevm/mandate", Version: "v0.2.0"},
			Deps: []*debug.Module{{Path: "github.com/tetratelabs/wazero", Version: "v1.12.0"}}},
			[]string{"mandate v0.2.0\n", "\nengines    ", "wazero v1.12.0 (the default; --engine picks another)"}, []string{"revision"}},
		{"a checkout", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-12-01T17:00:00Z"}, {Key: "vcs.modified", Value: "true"}}},
			[]string{"mandate (devel)\n", "revision   0123abcd (2026-12-01T17:00:00Z, with uncommitted changes)\n"}, nil},
	} {
		buildInfo = func() (*debug.BuildInfo, bool) { return c.bi, true }
		got := versionString()
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", c.name, got, w)
			}
		}
		for _, n := range c.not {
			if strings.Contains(got, n) {
				t.Errorf("%s: %q has %q", c.name, got, n)
			}
		}
	}
}
