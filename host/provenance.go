package host

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/internal/guestbuild"
)

const (
	// ProvenancePredicateType is SLSA provenance v1's predicate type.
	ProvenancePredicateType = "https://slsa.dev/provenance/v1"
	// GuestBuildType is the SLSA build type of a guest built by
	// mandate build: its external parameters are the language, the mode
	// and the source (the tree's digest, its revision), its internal ones
	// the toolchains and flags; every source file and the guest SDK are
	// resolved dependencies.
	GuestBuildType = "https://github.com/mandatevm/mandate/buildtypes/guest/v1"
	// BuilderID is the SLSA builder of such a build.
	BuilderID = "https://github.com/mandatevm/mandate/cmd/mandate"
)

// ProvenanceStatement is the build record rec of the module whose digest
// is module ("sha256:<hex>") as a SLSA provenance v1 statement about that
// module. It restates what the module's own mandate.build section says;
// what makes it true is rebuilding the source ("mandate verify
// --source"), not the key that signs it.
func ProvenanceStatement(name, module string, rec guestbuild.Record) (*intoto.Statement, error) {
	subject, err := audit.Subject(name, module)
	if err != nil {
		return nil, fmt.Errorf("provenance: module: %w", err)
	}
	source := map[string]any{"digest": rec.Source.Digest}
	if rec.Source.VCS != nil {
		source["vcs"] = map[string]any{"system": rec.Source.VCS.System, "revision": rec.Source.VCS.Revision}
	}
	ext, err := toStruct(map[string]any{"lang": rec.Lang, "mode": rec.Mode, "source": source})
	if err != nil {
		return nil, err
	}
	toolchain := map[string]any{}
	for k, v := range rec.Toolchain {
		toolchain[k] = v
	}
	flags := make([]any, len(rec.Flags))
	for i, f := range rec.Flags {
		flags[i] = f
	}
	internal, err := toStruct(map[string]any{"toolchain": toolchain, "flags": flags, "record_version": rec.Version})
	if err != nil {
		return nil, err
	}
	var deps []*intoto.ResourceDescriptor
	if rec.SDK.Digest != "" {
		sdk, err := audit.Subject("guest-sdk", rec.SDK.Digest)
		if err != nil {
			return nil, fmt.Errorf("provenance: SDK: %w", err)
		}
		if rec.SDK.Version != "" {
			if sdk.Annotations, err = toStruct(map[string]any{"version": rec.SDK.Version}); err != nil {
				return nil, err
			}
		}
		deps = append(deps, sdk)
	}
	for _, f := range rec.Source.Files {
		d, err := audit.Subject("source/"+f.Path, f.Digest)
		if err != nil {
			return nil, fmt.Errorf("provenance: %s: %w", f.Path, err)
		}
		deps = append(deps, d)
	}
	p := &slsa.Provenance{
		BuildDefinition: &slsa.BuildDefinition{
			BuildType:            GuestBuildType,
			ExternalParameters:   ext,
			InternalParameters:   internal,
			ResolvedDependencies: deps,
		},
		RunDetails: &slsa.RunDetails{Builder: &slsa.Builder{Id: BuilderID}},
	}
	if v := builderVersion(); v != "" {
		p.RunDetails.Builder.Version = map[string]string{"mandate": v}
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("provenance: %w", err)
	}
	pred, err := messageStruct(p)
	if err != nil {
		return nil, err
	}
	st := &intoto.Statement{
		Type:          intoto.StatementTypeUri,
		Subject:       []*intoto.ResourceDescriptor{subject},
		PredicateType: ProvenancePredicateType,
		Predicate:     pred,
	}
	return st, st.Validate()
}

// SameProvenance reports whether two provenance statements say the same
// thing of the same module (subjects compared by digest, not by name),
// the builder's version aside (a module built by one mandate, run by
// another).
func SameProvenance(a, b *intoto.Statement) bool {
	pa, errA := provenanceOf(a)
	pb, errB := provenanceOf(b)
	if errA != nil || errB != nil {
		return false
	}
	pa.RunDetails.Builder.Version, pb.RunDetails.Builder.Version = nil, nil
	return proto.Equal(pa, pb) && slices.Equal(subjectDigests(a), subjectDigests(b))
}

// subjectDigests are st's subjects' digests, as "alg:hex", sorted.
func subjectDigests(st *intoto.Statement) []string {
	var out []string
	for _, s := range st.GetSubject() {
		for alg, h := range s.GetDigest() {
			out = append(out, alg+":"+h)
		}
	}
	slices.Sort(out)
	return out
}

// provenanceOf is the SLSA provenance a statement carries.
func provenanceOf(st *intoto.Statement) (*slsa.Provenance, error) {
	if st.GetPredicateType() != ProvenancePredicateType {
		return nil, fmt.Errorf("predicate type %q, want %q", st.GetPredicateType(), ProvenancePredicateType)
	}
	b, err := protojson.Marshal(st.GetPredicate())
	if err != nil {
		return nil, err
	}
	var p slsa.Provenance
	if err := protojson.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("provenance: %w", err)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("provenance: %w", err)
	}
	return &p, nil
}

// builderVersion is this binary's module version, "(devel)" for a
// checkout's build.
func builderVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	return bi.Main.Version
}

// toStruct is v (JSON-shaped) as a protobuf Struct.
func toStruct(v map[string]any) (*structpb.Struct, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	s := &structpb.Struct{}
	return s, protojson.Unmarshal(b, s)
}

// messageStruct is a message's JSON form as a Struct: a statement's
// predicate.
func messageStruct(m proto.Message) (*structpb.Struct, error) {
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	s := &structpb.Struct{}
	return s, protojson.Unmarshal(b, s)
}

// ProvenanceRecord is the build record a provenance statement (as
// ProvenanceStatement writes it) restates, and the module it is about
// ("sha256:<hex>"). It is checked: ProvenanceStatement of the result must
// be the statement, so that nothing in it goes unread.
func ProvenanceRecord(st *intoto.Statement) (module string, rec guestbuild.Record, err error) {
	p, err := provenanceOf(st)
	if err != nil {
		return "", guestbuild.Record{}, err
	}
	if bt := p.GetBuildDefinition().GetBuildType(); bt != GuestBuildType {
		return "", guestbuild.Record{}, fmt.Errorf("provenance: build type %q, want %q", bt, GuestBuildType)
	}
	digests := subjectDigests(st)
	if len(digests) != 1 {
		return "", guestbuild.Record{}, fmt.Errorf("provenance: %d subjects, want the module alone", len(digests))
	}
	var ext struct {
		Lang   string `json:"lang"`
		Mode   string `json:"mode"`
		Source struct {
			Digest string                `json:"digest"`
			VCS    *guestbuild.RecordVCS `json:"vcs"`
		} `json:"source"`
	}
	var internal struct {
		Toolchain map[string]string `json:"toolchain"`
		Flags     []string          `json:"flags"`
		Version   int               `json:"record_version"`
	}
	if err := fromStruct(p.GetBuildDefinition().GetExternalParameters(), &ext); err != nil {
		return "", guestbuild.Record{}, fmt.Errorf("provenance: external parameters: %w", err)
	}
	if err := fromStruct(p.GetBuildDefinition().GetInternalParameters(), &internal); err != nil {
		return "", guestbuild.Record{}, fmt.Errorf("provenance: internal parameters: %w", err)
	}
	rec = guestbuild.Record{Version: internal.Version, Lang: ext.Lang, Mode: ext.Mode, Toolchain: internal.Toolchain, Flags: internal.Flags}
	if rec.Flags == nil {
		rec.Flags = []string{}
	}
	rec.Source.Digest, rec.Source.VCS = ext.Source.Digest, ext.Source.VCS
	for _, d := range p.GetBuildDefinition().GetResolvedDependencies() {
		h := "sha256:" + d.GetDigest()["sha256"]
		switch name := d.GetName(); {
		case name == "guest-sdk":
			rec.SDK.Digest = h
			if a := d.GetAnnotations(); a != nil {
				rec.SDK.Version = a.GetFields()["version"].GetStringValue()
			}
		case strings.HasPrefix(name, "source/"):
			rec.Source.Files = append(rec.Source.Files, guestbuild.RecordFile{Path: strings.TrimPrefix(name, "source/"), Digest: h})
		default:
			return "", guestbuild.Record{}, fmt.Errorf("provenance: a resolved dependency %q this build type does not have", name)
		}
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return "", guestbuild.Record{}, err
	}
	if rec, err = guestbuild.ParseRecord(b); err != nil {
		return "", guestbuild.Record{}, fmt.Errorf("provenance: %w", err)
	}
	back, err := ProvenanceStatement("module", digests[0], rec)
	if err != nil || !SameProvenance(back, st) {
		return "", guestbuild.Record{}, fmt.Errorf("provenance: it says more or other than a build record does")
	}
	return digests[0], rec, nil
}

// fromStruct decodes a Struct's JSON into v, refusing unknown fields.
func fromStruct(s *structpb.Struct, v any) error {
	b, err := protojson.Marshal(s)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
