package celebritytest

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// Snapshot is a copy of a server's data files taken at one moment: what an operator restores
// from a backup, or what a host that lost its disk comes back with.
type Snapshot struct {
	dir string
}

// Snapshot copies the server's data files (the AOF folder, an RDB file, a cluster node's
// nodes.conf) as they are now, while the server keeps running. With ServerOptions.AOF the
// copy holds every write acknowledged before the call (appendfsync always); a command being
// appended at that instant may be cut, which the server drops on load
// (aof-load-truncated). The copy is removed when the test ends.
func (s *Server) Snapshot(t testing.TB) Snapshot {
	t.Helper()
	dst := t.TempDir()
	if err := copyData(s.dir, dst); err != nil {
		t.Fatalf("celebritytest: snapshot of %s: %v", s.Addr(), err)
	}
	return Snapshot{dir: dst}
}

// RestoreSnapshot kills the server (as a crash would), replaces its data files with the
// snapshot's and starts it again on the same port: the server comes back at the earlier
// point, having forgotten every write acknowledged after the snapshot was taken.
func (s *Server) RestoreSnapshot(t testing.TB, snap Snapshot) {
	t.Helper()
	s.Resume()
	s.Kill()
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		t.Fatalf("celebritytest: restore %s: %v", s.Addr(), err)
	}
	for _, e := range entries {
		if e.Name() == "redis.log" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.dir, e.Name())); err != nil {
			t.Fatalf("celebritytest: restore %s: %v", s.Addr(), err)
		}
	}
	if err := copyData(snap.dir, s.dir); err != nil {
		t.Fatalf("celebritytest: restore %s: %v", s.Addr(), err)
	}
	if err := s.start(); err != nil {
		t.Fatalf("celebritytest: restart %s after restore: %v", s.Addr(), err)
	}
}

// copyData copies every file under src except the log into dst, keeping the folder layout.
func copyData(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil || rel == "." || rel == "redis.log" {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		return copyFile(path, target)
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
