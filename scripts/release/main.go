// Command release writes a module proxy on disk holding the repository's published modules
// at one candidate version, as the go command would download them once the version is
// tagged: scripts/release.sh installs and builds against it with GOPROXY=file://DIR.
//
//	go run ./scripts/release -version v0.2.0 -out /tmp/proxy
//
// It takes the files git tracks or would track (tracked and untracked, not ignored) in the
// working tree, so that a rehearsal tests the tree as it stands, and it refuses a candidate
// that could not be released as it is: a published module whose go.mod replaces one of the
// repository's modules, or a module of the repository that requires the library at
// another version than the candidate.
package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	modzip "golang.org/x/mod/zip"
)

// libraryPath is the library's module path; every other module of the repository lives
// under it.
const libraryPath = "github.com/celebrity-go/celebrity"

// published are the module directories a release tags (dir/vX.Y.Z, the root as vX.Y.Z).
var published = []string{".", "cmd/celebrity", "contrib/otel", "contrib/prometheus"}

func main() {
	version := flag.String("version", "", "the candidate version, vX.Y.Z")
	out := flag.String("out", "", "the proxy directory to write")
	root := flag.String("root", ".", "the repository's root")
	flag.Parse()
	if err := run(*root, *version, *out); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(root, version, out string) error {
	if !semver.IsValid(version) || semver.Canonical(version) != version || semver.Prerelease(version) != "" {
		return fmt.Errorf("-version must be a release version vX.Y.Z, got %q", version)
	}
	if out == "" {
		return errors.New("-out is required")
	}
	files, err := repoFiles(root)
	if err != nil {
		return err
	}
	if err := checkModules(root, files, version); err != nil {
		return err
	}
	when, err := commitTime(root)
	if err != nil {
		return err
	}
	for _, dir := range published {
		if err := writeModule(root, dir, files, version, when, out); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
	}
	return nil
}

// repoFiles lists, relative to root and with forward slashes, the files git tracks or would
// track that exist in the working tree.
func repoFiles(root string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	var files []string
	seen := map[string]bool{}
	for _, f := range strings.Split(string(b), "\x00") {
		if f == "" || seen[f] {
			continue
		}
		seen[f] = true
		if _, err := os.Lstat(filepath.Join(root, filepath.FromSlash(f))); errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree, not yet in the index
		}
		files = append(files, f)
	}
	return files, nil
}

// checkModules refuses a tree whose modules could not be released at version: a published
// module with a replace directive for one of the repository's modules (go install
// pkg@version refuses any replace), or any module requiring the library at another version.
func checkModules(root string, files []string, version string) error {
	var problems []string
	isPublished := map[string]bool{}
	for _, d := range published {
		isPublished[d] = true
	}
	for _, f := range files {
		if path.Base(f) != "go.mod" || strings.Contains(f, "/testdata/") {
			continue
		}
		dir := path.Dir(f)
		mf, err := parseMod(root, f)
		if err != nil {
			return err
		}
		for _, r := range mf.Replace {
			if isPublished[dir] || strings.HasPrefix(r.Old.Path, libraryPath) {
				problems = append(problems, fmt.Sprintf("%s replaces %s", f, r.Old.Path))
			}
		}
		for _, r := range mf.Require {
			if r.Mod.Path == libraryPath && r.Mod.Version != version {
				problems = append(problems, fmt.Sprintf("%s requires %s %s, not %s", f, libraryPath, r.Mod.Version, version))
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the tree cannot be released as %s:\n\t%s", version, strings.Join(problems, "\n\t"))
	}
	return nil
}

func parseMod(root, f string) (*modfile.File, error) {
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
	if err != nil {
		return nil, err
	}
	return modfile.Parse(f, b, nil)
}

// commitTime is HEAD's commit time, the time the proxy gives the version.
func commitTime(root string) (time.Time, error) {
	cmd := exec.Command("git", "log", "-1", "--format=%cI")
	cmd.Dir = root
	b, err := cmd.Output()
	if err != nil {
		return time.Time{}, fmt.Errorf("git log: %w", err)
	}
	return time.Parse(time.RFC3339, strings.TrimSpace(string(b)))
}

// writeModule writes <path>/@v/{list,<v>.info,<v>.mod,<v>.zip} for the module in dir.
func writeModule(root, dir string, files []string, version string, when time.Time, out string) error {
	modPath := path.Join(dir, "go.mod")
	if dir == "." {
		modPath = "go.mod"
	}
	mf, err := parseMod(root, modPath)
	if err != nil {
		return err
	}
	m := module.Version{Path: mf.Module.Mod.Path, Version: version}
	want := libraryPath
	if dir != "." {
		want += "/" + dir
	}
	if m.Path != want {
		return fmt.Errorf("module path %s, want %s", m.Path, want)
	}
	escaped, err := module.EscapePath(m.Path)
	if err != nil {
		return err
	}
	at := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	var zipped bytes.Buffer
	if err := modzip.Create(&zipped, m, moduleFiles(root, dir, files)); err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(modPath)))
	if err != nil {
		return err
	}
	if err := checkZip(zipped.Bytes(), m); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, when.UTC()})
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		"list":            []byte(version + "\n"),
		version + ".info": info,
		version + ".mod":  gomod,
		version + ".zip":  zipped.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// checkZip reads the archive back: it must hold the module's go.mod, and nothing from
// another module of the repository.
func checkZip(b []byte, m module.Version) error {
	r, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return err
	}
	prefix := m.String() + "/"
	hasMod := false
	for _, f := range r.File {
		name := strings.TrimPrefix(f.Name, prefix)
		switch {
		case name == "go.mod":
			hasMod = true
		case path.Base(name) == "go.mod":
			return fmt.Errorf("the module zip holds another module's %s", name)
		}
	}
	if !hasMod {
		return errors.New("the module zip holds no go.mod")
	}
	return nil
}

// moduleFiles are the repository's files under dir, as zip.Create takes them; Create leaves
// out those of nested modules (a directory with its own go.mod).
func moduleFiles(root, dir string, files []string) []modzip.File {
	var out []modzip.File
	for _, f := range files {
		rel := f
		if dir != "." {
			if !strings.HasPrefix(f, dir+"/") {
				continue
			}
			rel = strings.TrimPrefix(f, dir+"/")
		}
		out = append(out, file{rel: rel, abs: filepath.Join(root, filepath.FromSlash(f))})
	}
	return out
}

// file is one file of the working tree, as zip.Create reads it.
type file struct{ rel, abs string }

func (f file) Path() string                 { return f.rel }
func (f file) Lstat() (os.FileInfo, error)  { return os.Lstat(f.abs) }
func (f file) Open() (io.ReadCloser, error) { return os.Open(f.abs) }
