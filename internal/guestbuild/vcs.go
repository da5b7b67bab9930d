package guestbuild

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
)

// gitRevision is the commit HEAD names in the git checkout that holds dir,
// read from the repository's files (HEAD, then the loose ref or
// packed-refs; a worktree's .git file and its commondir are followed), no
// git process; nil when dir is in no checkout or HEAD names no commit yet.
// It does not say whether the working tree differs from that commit: the
// record's file digests say what was built.
func gitRevision(dir string) *RecordVCS {
	gitDir := ""
	for d := dir; ; {
		p := filepath.Join(d, ".git")
		if fi, err := os.Stat(p); err == nil {
			if fi.IsDir() {
				gitDir = p
			} else if b, err := os.ReadFile(p); err == nil {
				// A worktree or submodule: "gitdir: PATH".
				if g, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: "); ok {
					if !filepath.IsAbs(g) {
						g = filepath.Join(d, g)
					}
					gitDir = g
				}
			}
			break
		}
		up := filepath.Dir(d)
		if up == d {
			return nil
		}
		d = up
	}
	if gitDir == "" {
		return nil
	}
	head, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		return nil
	}
	h := strings.TrimSpace(string(head))
	ref, isRef := strings.CutPrefix(h, "ref: ")
	if !isRef {
		return gitHash(h)
	}
	if !strings.HasPrefix(ref, "refs/") || strings.Contains(ref, "..") {
		return nil
	}
	// A worktree's own refs are few (HEAD); branches are in the common
	// directory.
	common := gitDir
	if b, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
		c := strings.TrimSpace(string(b))
		if !filepath.IsAbs(c) {
			c = filepath.Join(gitDir, c)
		}
		common = c
	}
	for _, g := range []string{gitDir, common} {
		if b, err := os.ReadFile(filepath.Join(g, filepath.FromSlash(ref))); err == nil {
			return gitHash(strings.TrimSpace(string(b)))
		}
	}
	b, err := os.ReadFile(filepath.Join(common, "packed-refs"))
	if err != nil {
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		hash, name, ok := strings.Cut(sc.Text(), " ")
		if ok && name == ref {
			return gitHash(hash)
		}
	}
	return nil
}

// gitHash is the record of a commit hash (SHA-1 or SHA-256), or nil when
// s is none.
func gitHash(s string) *RecordVCS {
	if len(s) != 40 && len(s) != 64 {
		return nil
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return nil
		}
	}
	return &RecordVCS{System: "git", Revision: s}
}
