package scaffold

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
)

// A TOML string: basic ("...", with escapes) or literal ('...').
const tomlStringRE = `("(?:[^"\\]|\\.)*"|'[^']*')`

var (
	// mandate = { ..., path = "..." } in [dependencies].
	cargoInlinePath = regexp.MustCompile(`^\s*(?:mandate|"mandate")\s*=\s*\{[^#]*?\bpath\s*=\s*` + tomlStringRE)
	// path = "..." in [dependencies.mandate].
	cargoTablePath = regexp.MustCompile(`^\s*(?:path|"path")\s*=\s*` + tomlStringRE)
	cargoSection   = regexp.MustCompile(`^\s*\[\s*([^\[\]]*?)\s*\]`)
)

// cargoMandatePath finds the path of the mandate dependency of a
// Cargo.toml ([dependencies] mandate = { path = "..." }, or path = "..." in
// [dependencies.mandate]): the byte offsets of its TOML string. It reads
// Cargo.toml files as they are written (one key = value per line), not all
// of TOML.
func cargoMandatePath(toml []byte) (start, end int, ok bool) {
	section := ""
	off := 0
	for _, line := range bytes.SplitAfter(toml, []byte("\n")) {
		if m := cargoSection.FindSubmatch(line); m != nil {
			section = strings.ReplaceAll(string(m[1]), " ", "")
		} else {
			var m []int
			switch section {
			case "dependencies":
				m = cargoInlinePath.FindSubmatchIndex(line)
			case "dependencies.mandate", `dependencies."mandate"`:
				m = cargoTablePath.FindSubmatchIndex(line)
			}
			if m != nil {
				return off + m[2], off + m[3], true
			}
		}
		off += len(line)
	}
	return 0, 0, false
}

// CargoMandatePath is the path a Cargo.toml gives its mandate dependency,
// and whether it gives one.
func CargoMandatePath(toml []byte) (string, bool) {
	start, end, ok := cargoMandatePath(toml)
	if !ok {
		return "", false
	}
	s := string(toml[start:end])
	if s[0] == '\'' {
		return s[1 : len(s)-1], true
	}
	p, err := strconv.Unquote(s)
	if err != nil {
		return "", false
	}
	return p, true
}

// SetCargoMandatePath returns the Cargo.toml with its mandate dependency's
// path replaced by path, every other byte as it was; false when it gives
// no such path.
func SetCargoMandatePath(toml []byte, path string) ([]byte, bool) {
	start, end, ok := cargoMandatePath(toml)
	if !ok {
		return nil, false
	}
	out := append([]byte(nil), toml[:start]...)
	out = append(out, TOMLString(path)...)
	return append(out, toml[end:]...), true
}
