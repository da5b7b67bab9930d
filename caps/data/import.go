package data

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// MaxImportBytes bounds an import file.
const MaxImportBytes = 256 << 20

// ParseJSON reads records from a JSON array of
//
//	{"id":"r1","owner":"alice","fields":{"plan":"gold","passport":"X123"},
//	 "labels":{"passport":["pii:$owner"]}}
//
// Unknown keys are errors; errors name the record's index (0-based).
func ParseJSON(r io.Reader) ([]Record, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxImportBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxImportBytes {
		return nil, fmt.Errorf("more than %d bytes", MaxImportBytes)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("want a JSON array of records: %v", err)
	}
	out := make([]Record, 0, len(raw))
	for i, m := range raw {
		var rec struct {
			ID     *string                    `json:"id"`
			Owner  *string                    `json:"owner"`
			Fields map[string]json.RawMessage `json:"fields"`
			Labels map[string][]string        `json:"labels"`
		}
		dec := json.NewDecoder(bytes.NewReader(m))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			return nil, fmt.Errorf("record %d: %v", i, err)
		}
		if rec.ID == nil {
			return nil, fmt.Errorf("record %d: missing \"id\"", i)
		}
		if rec.Owner == nil {
			return nil, fmt.Errorf("record %d: missing \"owner\"", i)
		}
		if rec.Fields == nil {
			rec.Fields = map[string]json.RawMessage{}
		}
		r := Record{ID: *rec.ID, Owner: *rec.Owner, Fields: rec.Fields, Labels: rec.Labels}
		if _, err := normalize(r); err != nil {
			return nil, fmt.Errorf("record %d: %v", i, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// ParseCSV reads records from CSV with a header row. Columns "id" and
// "owner" are required; every other column is a field whose values are
// JSON strings (an empty cell leaves the field out). A column header
// "name[tag,tag...]" labels the field with the tags, "$owner" standing for
// the row's owner: "passport[pii:$owner]". Errors name the line (1-based,
// the header is line 1).
func ParseCSV(r io.Reader) ([]Record, error) {
	cr := csv.NewReader(io.LimitReader(r, MaxImportBytes+1))
	cr.ReuseRecord = false
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("line 1: missing the header row")
	}
	if err != nil {
		return nil, fmt.Errorf("line 1: %v", err)
	}
	type column struct {
		field string
		tags  []string
	}
	cols := make([]column, len(header))
	idCol, ownerCol := -1, -1
	seen := map[string]bool{}
	for i, h := range header {
		h = strings.TrimSpace(h)
		if i == 0 {
			h = strings.TrimPrefix(h, "\ufeff") // a byte order mark
		}
		name, tags, err := parseColumn(h)
		if err != nil {
			return nil, fmt.Errorf("line 1: column %d: %v", i+1, err)
		}
		if seen[name] {
			return nil, fmt.Errorf("line 1: column %q repeats", name)
		}
		seen[name] = true
		switch name {
		case "id", "owner":
			if tags != nil {
				return nil, fmt.Errorf("line 1: column %q cannot have labels", name)
			}
			if name == "id" {
				idCol = i
			} else {
				ownerCol = i
			}
		default:
			if err := validFieldName(name); err != nil {
				return nil, fmt.Errorf("line 1: column %d: %v", i+1, err)
			}
		}
		cols[i] = column{name, tags}
	}
	if idCol < 0 || ownerCol < 0 {
		return nil, errors.New(`line 1: the header must have columns "id" and "owner"`)
	}
	var out []Record
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err // csv.ParseError names the line
		}
		line, _ := cr.FieldPos(0)
		rec := Record{ID: row[idCol], Owner: row[ownerCol], Fields: map[string]json.RawMessage{}, Labels: map[string][]string{}}
		for i, c := range cols {
			if i == idCol || i == ownerCol || row[i] == "" {
				continue
			}
			v, _ := json.Marshal(row[i])
			rec.Fields[c.field] = v
			if c.tags != nil {
				rec.Labels[c.field] = c.tags
			}
		}
		if _, err := normalize(rec); err != nil {
			return nil, fmt.Errorf("line %d: %v", line, err)
		}
		out = append(out, rec)
		if len(out) > MaxImportRecords {
			return nil, fmt.Errorf("line %d: more than %d records", line, MaxImportRecords)
		}
	}
	return out, nil
}

// parseColumn splits "name[tag,tag]" into the name and its tags (nil
// without brackets). Tags are separated by commas or spaces.
func parseColumn(h string) (string, []string, error) {
	open := strings.IndexByte(h, '[')
	if open < 0 {
		if strings.ContainsRune(h, ']') {
			return "", nil, fmt.Errorf("%q: unbalanced ]", h)
		}
		return h, nil, nil
	}
	if !strings.HasSuffix(h, "]") {
		return "", nil, fmt.Errorf("%q: want name[tag,...]", h)
	}
	name := strings.TrimSpace(h[:open])
	inner := h[open+1 : len(h)-1]
	if strings.ContainsAny(inner, "[]") {
		return "", nil, fmt.Errorf("%q: want name[tag,...]", h)
	}
	tags := strings.FieldsFunc(inner, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
	if tags == nil {
		tags = []string{}
	}
	return name, tags, nil
}

// Importable reports whether file has an extension ReadFile reads.
func Importable(file string) bool {
	ext := strings.ToLower(filepath.Ext(file))
	return ext == ".json" || ext == ".csv"
}

// ReadFile parses an import file: a .json array of objects (ParseJSON) or
// a .csv table (ParseCSV).
func ReadFile(file string) ([]Record, error) {
	parse := ParseJSON
	switch strings.ToLower(filepath.Ext(file)) {
	case ".json":
	case ".csv":
		parse = ParseCSV
	default:
		return nil, fmt.Errorf("%s: want a .json or .csv file", file)
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	recs, err := parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %v (nothing imported)", file, err)
	}
	return recs, nil
}
