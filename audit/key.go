package audit

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// loadKey reads the signing key at path, generating it (mode 0600) when
// the file does not exist. A key file that is not a regular file, or that
// group or others may read or write, is refused.
func loadKey(path string) (note.Signer, note.Verifier, string, error) {
	for range 2 {
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			skey, _, err := note.GenerateKey(rand.Reader, keyName)
			if err != nil {
				return nil, nil, "", fmt.Errorf("audit key: %w", err)
			}
			switch err := publishKey(path, skey); {
			case errors.Is(err, fs.ErrExist):
				continue // created concurrently: read theirs
			case err != nil:
				return nil, nil, "", fmt.Errorf("audit key: %w", err)
			}
			return parseKey(skey)
		}
		if err != nil {
			return nil, nil, "", fmt.Errorf("audit key: %w", err)
		}
		if !fi.Mode().IsRegular() {
			return nil, nil, "", fmt.Errorf("audit key %s: not a regular file", path)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			return nil, nil, "", fmt.Errorf("audit key %s: mode %#o lets group or others access it; refusing to use it (chmod 600 it, and consider it leaked)", path, perm)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, "", fmt.Errorf("audit key: %w", err)
		}
		s, v, vk, err := parseKey(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, nil, "", fmt.Errorf("audit key %s: %w", path, err)
		}
		return s, v, vk, nil
	}
	return nil, nil, "", fmt.Errorf("audit key %s: created and removed concurrently", path)
}

// publishKey makes path hold skey, all or nothing: the key is written and
// synced to a private temporary file in the same directory, then linked to
// path, which fails with fs.ErrExist when another process got there first.
// A reader can therefore never see a half-written key (creating path with
// O_EXCL and then writing it let a concurrent first run read it empty).
func publishKey(path, skey string) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".audit.key-*")
	if err != nil {
		return err
	}
	tmp := f.Name() // mode 0600, as CreateTemp makes it
	defer os.Remove(tmp)
	_, err = f.WriteString(skey + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Link(tmp, path); err != nil {
		return err // fs.ErrExist when another process published first
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync() // best effort: the link itself is already atomic
		d.Close()
	}
	return nil
}

// parseKey returns the signer of skey and the verifier (and its key
// string) of its public half.
func parseKey(skey string) (note.Signer, note.Verifier, string, error) {
	signer, err := note.NewSigner(skey)
	if err != nil {
		return nil, nil, "", fmt.Errorf("not a note signing key: %w", err)
	}
	// skey is PRIVATE+KEY+<name>+<hash>+<base64(alg || seed)>.
	parts := strings.SplitN(skey, "+", 5)
	key, err := base64.StdEncoding.DecodeString(parts[len(parts)-1])
	if err != nil || len(key) != 1+ed25519.SeedSize || key[0] != 1 {
		return nil, nil, "", errors.New("not an Ed25519 note signing key")
	}
	pub := ed25519.NewKeyFromSeed(key[1:]).Public().(ed25519.PublicKey)
	vkey, err := note.NewEd25519VerifierKey(signer.Name(), pub)
	if err != nil {
		return nil, nil, "", err
	}
	verif, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, nil, "", err
	}
	if verif.KeyHash() != signer.KeyHash() {
		return nil, nil, "", errors.New("signing key hash does not match its key")
	}
	return signer, verif, vkey, nil
}
