package mcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Pins. A tool's definition is what a model reads to decide how to call
// it (its description, its schemas): a server that changes it after the
// operator read it can steer the agent (a "rug pull"). So every tool a
// grant allows is pinned by the digest of its definition, and a call of a
// tool whose definition is not the pinned one is refused before anything
// is sent.
//
// The digest is "sha256:" and the hex SHA-256 of the definition's
// canonical JSON: the object {name, title, description, inputSchema,
// outputSchema, annotations} as the server listed it (a member the server
// left out stays out), members sorted by name at every depth, no white
// space, strings as encoding/json writes them without HTML escaping,
// numbers as the server wrote them.

// defOf is the definition of a tool as the Go SDK read it from the
// server's list, written here rather than by the SDK's own marshaling
// (which an environment variable of mandate's, MCPGODEBUG, changes): a
// string member that is empty is absent, and so is an annotation hint
// that is false or unset (the SDK reads both alike).
func defOf(t *sdk.Tool) (json.RawMessage, error) {
	m := map[string]any{"name": t.Name, "inputSchema": t.InputSchema}
	if t.Title != "" {
		m["title"] = t.Title
	}
	if t.Description != "" {
		m["description"] = t.Description
	}
	if t.OutputSchema != nil {
		m["outputSchema"] = t.OutputSchema
	}
	if a := t.Annotations; a != nil {
		am := map[string]any{}
		if a.Title != "" {
			am["title"] = a.Title
		}
		if a.ReadOnlyHint {
			am["readOnlyHint"] = true
		}
		if a.IdempotentHint {
			am["idempotentHint"] = true
		}
		if a.DestructiveHint != nil {
			am["destructiveHint"] = *a.DestructiveHint
		}
		if a.OpenWorldHint != nil {
			am["openWorldHint"] = *a.OpenWorldHint
		}
		m["annotations"] = am
	}
	return json.Marshal(m)
}

// defMembers are the members of a tool's definition a pin covers.
var defMembers = []string{"name", "title", "description", "inputSchema", "outputSchema", "annotations"}

// Definition is one upstream tool the grant's patterns allow, as it is now.
type Definition struct {
	Name   string
	Digest string          // of Def
	Def    json.RawMessage // canonical JSON of the definition
	Pin    string          // the grant's pin, "" if none
}

// Pinned reports whether the tool's definition is the one pinned.
func (d Definition) Pinned() bool { return d.Pin != "" && d.Pin == d.Digest }

// Digest returns the canonical digest of one definition: a JSON object,
// of which only the members a pin covers count (defMembers).
func Digest(def json.RawMessage) (string, error) {
	c, err := canonicalDef(def)
	if err != nil {
		return "", err
	}
	return digestOf(c), nil
}

func digestOf(canon []byte) string {
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// canonicalDef is the canonical JSON of a tool's definition: the members
// a pin covers, canonical.
func canonicalDef(def json.RawMessage) ([]byte, error) {
	if err := abi.CheckJSON(def); err != nil {
		return nil, fmt.Errorf("a tool definition: %v", err)
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(def, &all); err != nil || all == nil {
		return nil, fmt.Errorf("a tool definition is not a JSON object")
	}
	m := make(map[string]any, len(defMembers))
	for _, k := range defMembers {
		raw, ok := all[k]
		if !ok {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("a tool definition's %s: %v", k, err)
		}
		m[k] = v
	}
	return canonical(m)
}

// canonical writes v (decoded with UseNumber) as canonical JSON:
// encoding/json sorts map keys; HTML escaping is off and the trailing
// newline dropped.
func canonical(v any) ([]byte, error) { return kindapi.CanonicalJSON(v) }
