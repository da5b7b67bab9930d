package abi

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// ParseSize parses a size: a whole number followed by an optional unit, B,
// KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024). Units are
// case-insensitive and may follow a space. A plain number is bytes.
//
//	ParseSize("64MiB") // 67108864
func ParseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf(`%q is not a size (examples: "64MiB", "512KB", "1048576")`, s)
	}
	digits, unit := t[:i], strings.TrimLeft(t[i:], " \t")
	var mult uint64
	switch strings.ToLower(unit) {
	case "", "b":
		mult = 1
	case "kb":
		mult = 1000
	case "mb":
		mult = 1000 * 1000
	case "gb":
		mult = 1000 * 1000 * 1000
	case "kib":
		mult = 1 << 10
	case "mib":
		mult = 1 << 20
	case "gib":
		mult = 1 << 30
	default:
		return 0, fmt.Errorf("%q has an unknown unit %q (units: B, KB, MB, GB, KiB, MiB, GiB)", s, unit)
	}
	var n uint64
	for _, c := range digits {
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, fmt.Errorf("%q is too large", s)
		}
		n = n*10 + d
	}
	if n > math.MaxUint64/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * mult, nil
}

// Size is a byte count in an argument document or grant: a JSON number of
// bytes, or a string ParseSize reads ("64KiB").
type Size int64

// UnmarshalJSON accepts a number or a size string.
func (s *Size) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var str string
		if err := json.Unmarshal(b, &str); err != nil {
			return err
		}
		n, err := ParseSize(str)
		if err != nil || n > math.MaxInt64 {
			return &json.UnmarshalTypeError{Value: "string " + strconv.Quote(str), Type: reflect.TypeFor[Size]()}
		}
		*s = Size(n)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return &json.UnmarshalTypeError{Value: "number " + string(b), Type: reflect.TypeFor[Size]()}
	}
	*s = Size(n)
	return nil
}
