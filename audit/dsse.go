package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/secure-systems-lab/go-securesystemslib/signerverifier"
	"golang.org/x/mod/sumdb/note"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Receipts and build provenance as in-toto attestations: an in-toto
// Statement (v1) in a DSSE envelope, signed with the log's key (the
// Ed25519 key of its checkpoints and receipts), so that supply-chain
// tooling reads them with no Mandate code. The envelope and statement
// encodings are the libraries' (go-securesystemslib's dsse, in-toto's
// attestation protos); what is ours is the predicate type of a run.

const (
	// RunPredicateType is the predicate type of a receipt as a statement:
	// what a run could do. Its predicate is the Receipt's JSON.
	RunPredicateType = "https://github.com/mandatevm/mandate/attestation/run/v1"
	// StatementPayloadType is the DSSE payload type of an in-toto
	// statement.
	StatementPayloadType = "application/vnd.in-toto+json"
)

// maxEnvelope bounds one envelope read from a file anyone may hand over.
const maxEnvelope = 16 << 20

// noteSigner signs DSSE's pre-authentication encoding with a note key:
// a note's Ed25519 signer signs the bytes it is given, so the signature
// is a plain Ed25519 one over PAE, as DSSE's Ed25519 scheme wants.
type noteSigner struct {
	s     note.Signer
	keyID string
}

func (n noteSigner) Sign(_ context.Context, data []byte) ([]byte, error) { return n.s.Sign(data) }
func (n noteSigner) KeyID() (string, error)                              { return n.keyID, nil }

// KeyID is the key id an envelope's signature names: the library's own
// (dsse.SHA256KeyID, the SSH-style SHA256 fingerprint of the public
// key), so that a verifier given only the public key matches it.
func KeyID(pub ed25519.PublicKey) (string, error) { return dsse.SHA256KeyID(pub) }

// PublicKey returns the Ed25519 public key of a note verifier key
// (NAME+HASH+BASE64, as "mandate audit verify" prints it).
func PublicKey(vkey string) (ed25519.PublicKey, error) {
	if _, err := note.NewVerifier(vkey); err != nil {
		return nil, fmt.Errorf("verifier key: %w", err)
	}
	// NAME+HASH+BASE64: the name has no '+', base64 may.
	parts := strings.SplitN(vkey, "+", 3)
	raw, err := base64.StdEncoding.DecodeString(parts[len(parts)-1])
	if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != 1 {
		return nil, errors.New("verifier key: not an Ed25519 key")
	}
	return ed25519.PublicKey(raw[1:]), nil
}

// PublicKeyPEM returns vkey's public key as a PEM "PUBLIC KEY" block
// (PKIX), the form generic DSSE verifiers and openssl load.
func PublicKeyPEM(vkey string) ([]byte, error) {
	pub, err := PublicKey(vkey)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// DSSEVerifier is the library's Ed25519 verifier for vkey's public key,
// the one OpenEnvelope uses and any DSSE tool can build from the PEM.
func DSSEVerifier(vkey string) (dsse.Verifier, error) {
	pub, err := PublicKey(vkey)
	if err != nil {
		return nil, err
	}
	return signerverifier.NewED25519SignerVerifierFromSSLibKey(&signerverifier.SSLibKey{
		KeyType: signerverifier.ED25519KeyType,
		Scheme:  signerverifier.ED25519KeyType,
		KeyVal:  signerverifier.KeyVal{Public: hex.EncodeToString(pub)},
	})
}

// SignStatement validates st and signs it into a DSSE envelope with the
// log's key.
func (l *Log) SignStatement(st *intoto.Statement) (*dsse.Envelope, error) {
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("in-toto statement: %w", err)
	}
	payload, err := protojson.Marshal(st)
	if err != nil {
		return nil, err
	}
	es, err := dsse.NewEnvelopeSigner(noteSigner{s: l.signer})
	if err != nil {
		return nil, err
	}
	return es.SignPayload(context.Background(), StatementPayloadType, payload)
}

// OpenEnvelope verifies env with vkey (the library's verifier) and
// returns its in-toto statement, validated.
func OpenEnvelope(env *dsse.Envelope, vkey string) (*intoto.Statement, error) {
	v, err := DSSEVerifier(vkey)
	if err != nil {
		return nil, err
	}
	ev, err := dsse.NewEnvelopeVerifier(v)
	if err != nil {
		return nil, err
	}
	if env.PayloadType != StatementPayloadType {
		return nil, fmt.Errorf("envelope: payload type %q, want %q", env.PayloadType, StatementPayloadType)
	}
	_, payload, err := ev.VerifyAndDecode(context.Background(), env)
	if err != nil {
		return nil, fmt.Errorf("envelope: %w", err)
	}
	var st intoto.Statement
	if err := protojson.Unmarshal(payload, &st); err != nil {
		return nil, fmt.Errorf("envelope: its payload is not an in-toto statement: %w", err)
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("envelope: in-toto statement: %w", err)
	}
	return &st, nil
}

// ReadEnvelopes reads DSSE envelopes: one JSON object, or JSON Lines (an
// in-toto bundle, one envelope per line).
func ReadEnvelopes(b []byte) ([]*dsse.Envelope, error) {
	if len(b) > 4*maxEnvelope {
		return nil, fmt.Errorf("envelopes: %d bytes, more than %d", len(b), 4*maxEnvelope)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var out []*dsse.Envelope
	for {
		var env dsse.Envelope
		err := dec.Decode(&env)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("envelope %d: %w", len(out)+1, err)
		}
		if env.PayloadType == "" || env.Payload == "" || len(env.Signatures) == 0 {
			return nil, fmt.Errorf("envelope %d: not a DSSE envelope (payloadType, payload and signatures are required)", len(out)+1)
		}
		out = append(out, &env)
	}
	if len(out) == 0 {
		return nil, errors.New("envelopes: none")
	}
	return out, nil
}

// EncodeEnvelopes writes envelopes as JSON Lines (an in-toto bundle).
func EncodeEnvelopes(envs ...*dsse.Envelope) ([]byte, error) {
	var b bytes.Buffer
	for _, env := range envs {
		line, err := json.Marshal(env)
		if err != nil {
			return nil, err
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// ReceiptStatement is r as an in-toto statement: its subjects the module
// (and the manifest, when its digest is known), its predicate r's JSON
// under RunPredicateType. A receipt whose JSON a statement's predicate
// cannot carry exactly (a number past 2^53, which protobuf's Struct keeps
// as a double) is refused rather than changed.
func ReceiptStatement(r Receipt) (*intoto.Statement, error) {
	r.Version = ReceiptVersion
	subj, err := Subject("module", r.Module)
	if err != nil {
		return nil, fmt.Errorf("receipt: module: %w", err)
	}
	subjects := []*intoto.ResourceDescriptor{subj}
	if r.ManifestDigest != "" {
		m, err := Subject(r.Manifest, r.ManifestDigest)
		if err != nil {
			return nil, fmt.Errorf("receipt: manifest: %w", err)
		}
		subjects = append(subjects, m)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(b) {
		return nil, errors.New("receipt: a scope or extra field is not valid UTF-8")
	}
	// A Struct holds every number as a double: a receipt it would change
	// is refused, not rounded.
	if n, err := inexactNumber(b); err != nil || n != "" {
		return nil, fmt.Errorf("receipt: the number %s in it cannot be carried exactly in an in-toto predicate (a double); write it as a note receipt", kindapi.QuoteTrunc(n))
	}
	pred := &structpb.Struct{}
	if err := protojson.Unmarshal(b, pred); err != nil {
		return nil, fmt.Errorf("receipt: as a predicate: %w", err)
	}
	return &intoto.Statement{
		Type:          intoto.StatementTypeUri,
		Subject:       subjects,
		PredicateType: RunPredicateType,
		Predicate:     pred,
	}, nil
}

// ReceiptFromStatement returns the receipt a verified statement carries,
// checked as OpenReceipt checks one (its version, its checkpoint with
// vkey), and that its subject names its module.
func ReceiptFromStatement(st *intoto.Statement, vkey string) (Receipt, error) {
	if st.GetPredicateType() != RunPredicateType {
		return Receipt{}, fmt.Errorf("receipt: predicate type %q, want %q", st.GetPredicateType(), RunPredicateType)
	}
	b, err := protojson.Marshal(st.GetPredicate())
	if err != nil {
		return Receipt{}, err
	}
	r, err := decodeReceipt(b)
	if err != nil {
		return Receipt{}, err
	}
	if err := checkReceipt(r, vkey); err != nil {
		return Receipt{}, err
	}
	if !SubjectHas(st, r.Module) {
		return Receipt{}, fmt.Errorf("receipt: the statement's subjects do not name its module %s", r.Module)
	}
	return r, nil
}

// SubjectHas reports whether one of st's subjects has the digest
// ("sha256:<hex>").
func SubjectHas(st *intoto.Statement, digest string) bool {
	alg, hexd, ok := strings.Cut(digest, ":")
	if !ok {
		return false
	}
	for _, s := range st.GetSubject() {
		if s.GetDigest()[alg] == hexd {
			return true
		}
	}
	return false
}

// Subject is a resource descriptor (a statement's subject, a
// provenance's dependency) named name with the digest "sha256:<hex>".
func Subject(name, digest string) (*intoto.ResourceDescriptor, error) {
	alg, hexd, ok := strings.Cut(digest, ":")
	if !ok || alg != "sha256" || len(hexd) != 64 {
		return nil, fmt.Errorf("digest %q is not sha256:<64 hex>", digest)
	}
	if _, err := hex.DecodeString(hexd); err != nil {
		return nil, fmt.Errorf("digest %q: %w", digest, err)
	}
	return &intoto.ResourceDescriptor{Name: name, Digest: map[string]string{alg: hexd}}, nil
}

// inexactNumber returns the first number in the JSON document b that a
// double does not hold exactly, or "" when there is none.
func inexactNumber(b []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		if n, ok := tok.(json.Number); ok && !kindapi.ExactDouble(string(n)) {
			return string(n), nil
		}
	}
}
