package vfs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// implementations returns every FS with a directory to work in, so that
// each behaves like the real one (the os package) on the same script.
func implementations(t *testing.T) map[string]func() (FS, string) {
	return map[string]func() (FS, string){
		"os":    func() (FS, string) { return OS(), t.TempDir() },
		"crash": func() (FS, string) { return NewCrashFS(), "/data" },
		"fault": func() (FS, string) { return NewFaultFS(NewCrashFS()), "data" },
	}
}

func TestRoundTrip(t *testing.T) {
	for name, mk := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			fs, dir := mk()
			dir = path.Join(dir, "sub")
			must(t, fs.MkdirAll(dir))
			testFileIO(t, fs, path.Join(dir, "a"))
			testNamespace(t, fs, dir)
		})
	}
}

func testFileIO(t *testing.T, fs FS, name string) {
	f := mustCreate(t, fs, name)
	write(t, f, "hello ")
	write(t, f, "world")
	wantSize(t, f, 11)
	wantReadAt(t, f, 6, "world", nil)
	wantReadAt(t, f, 9, "ld?", io.EOF)
	wantReadAt(t, f, 11, "?", io.EOF)
	must(t, f.Sync())
	must(t, f.Truncate(5))
	write(t, f, "!")
	wantReadAt(t, f, 0, "hello!", nil)
	must(t, f.Truncate(8))
	wantReadAt(t, f, 0, "hello!\x00\x00", nil)
	must(t, f.Close())
	if err := f.Close(); err == nil {
		t.Error("second Close: no error")
	}

	r, err := fs.Open(name)
	must(t, err)
	if _, err := r.Write([]byte("x")); err == nil {
		t.Error("Write on a file opened by Open: no error")
	}
	wantReadAt(t, r, 0, "hello!\x00\x00", nil)
	must(t, r.Close())

	a, err := fs.OpenAppend(name)
	must(t, err)
	write(t, a, "+")
	wantReadAt(t, a, 0, "hello!\x00\x00+", nil)
	must(t, a.Close())

	f = mustCreate(t, fs, name) // truncates
	wantSize(t, f, 0)
	must(t, f.Close())
}

func testNamespace(t *testing.T, fs FS, dir string) {
	for _, n := range []string{"c", "b"} {
		f := mustCreate(t, fs, path.Join(dir, n))
		write(t, f, n)
		must(t, f.Close())
	}
	wantDir(t, fs, dir, "a", "b", "c")
	must(t, fs.Rename(path.Join(dir, "b"), path.Join(dir, "a")))
	wantDir(t, fs, dir, "a", "c")
	wantFile(t, fs, path.Join(dir, "a"), "b")
	must(t, fs.Remove(path.Join(dir, "c")))
	wantDir(t, fs, dir, "a")
	must(t, fs.SyncDir(dir))

	missing := path.Join(dir, "c")
	if _, _, err := fs.Stat(missing); !IsNotExist(err) {
		t.Errorf("Stat of a removed file: %v, want not-exist", err)
	}
	if _, err := fs.Open(missing); !IsNotExist(err) {
		t.Errorf("Open of a removed file: %v, want not-exist", err)
	}
	if err := fs.Remove(missing); !IsNotExist(err) {
		t.Errorf("Remove of a removed file: %v, want not-exist", err)
	}
	if err := fs.Remove(dir); err == nil {
		t.Error("Remove of a non-empty directory: no error")
	}
	size, isDir, err := fs.Stat(path.Join(dir, "a"))
	if err != nil || size != 1 || isDir {
		t.Errorf("Stat(a) = %d, %v, %v; want 1, false, nil", size, isDir, err)
	}
	if _, isDir, err := fs.Stat(dir); err != nil || !isDir {
		t.Errorf("Stat(dir) = %v, %v; want a directory", isDir, err)
	}
}

func TestIsNotExistThroughWrapping(t *testing.T) {
	_, err := NewCrashFS().Open("nope")
	if !IsNotExist(err) || !IsNotExist(errors.Join(errors.New("ctx"), err)) {
		t.Fatalf("IsNotExist(%v) = false", err)
	}
}

// Helpers shared by the tests of the package.

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustCreate(t *testing.T, fs FS, name string) File {
	t.Helper()
	f, err := fs.Create(name)
	must(t, err)
	return f
}

func write(t *testing.T, f File, s string) {
	t.Helper()
	if n, err := f.Write([]byte(s)); err != nil || n != len(s) {
		t.Fatalf("Write(%q) = %d, %v", s, n, err)
	}
}

func wantSize(t *testing.T, f File, want int64) {
	t.Helper()
	if got, err := f.Size(); err != nil || got != want {
		t.Fatalf("Size() = %d, %v; want %d", got, err, want)
	}
}

// wantReadAt reads len(want) bytes at off; a '?' in want is a byte past the
// end that must not be read.
func wantReadAt(t *testing.T, f File, off int64, want string, wantErr error) {
	t.Helper()
	buf := make([]byte, len(want))
	n, err := f.ReadAt(buf, off)
	got := string(buf[:n])
	if err != wantErr || got != string(bytes.TrimRight([]byte(want), "?")) {
		t.Fatalf("ReadAt(%d) = %q, %v; want %q, %v", off, got, err, want, wantErr)
	}
}

func wantDir(t *testing.T, fs FS, dir string, want ...string) {
	t.Helper()
	got, err := fs.ReadDir(dir)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ReadDir(%s) = %q, %v; want %q", dir, got, err, want)
	}
}

// wantFile checks the whole content of name, read through FS.Open.
func wantFile(t *testing.T, fs FS, name, want string) {
	t.Helper()
	if got := readAll(t, fs, name); string(got) != want {
		t.Fatalf("%s holds %q, want %q", name, got, want)
	}
}

func readAll(t *testing.T, fs FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(name)
	must(t, err)
	defer f.Close()
	size, err := f.Size()
	must(t, err)
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return buf
}

// TestErrors checks that every implementation fails the same misuses with
// the same errno as Linux.
func TestErrors(t *testing.T) {
	for name, mk := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			fs, dir := mk()
			p := func(s string) string { return path.Join(dir, s) }
			must(t, fs.MkdirAll(p("d/sub")))
			must(t, fs.MkdirAll(p("e/sub")))
			must(t, fs.MkdirAll(p("empty")))
			must(t, mustCreate(t, fs, p("f")).Close())
			_, createErr := fs.Create(p("d"))
			_, readDirErr := fs.ReadDir(p("f"))
			_, _, statErr := fs.Stat(p("f/x"))
			for _, c := range []struct {
				what string
				err  error
				want error
			}{
				{"Create of a directory", createErr, syscall.EISDIR},
				{"ReadDir of a file", readDirErr, syscall.ENOTDIR},
				{"Stat through a file", statErr, syscall.ENOTDIR},
				{"MkdirAll through a file", fs.MkdirAll(p("f/x")), syscall.ENOTDIR},
				{"Remove of a non-empty directory", fs.Remove(p("d")), syscall.ENOTEMPTY},
				{"Rename over an empty directory", fs.Rename(p("f"), p("empty")), syscall.EEXIST},
				{"Rename of a directory over a file", fs.Rename(p("d"), p("f")), syscall.ENOTDIR},
				{"Rename of a directory over one", fs.Rename(p("empty"), p("e")), syscall.EEXIST},
				{"Rename into its own subtree", fs.Rename(p("d"), p("d/sub/d")), syscall.EINVAL},
				{"Rename of a missing file", fs.Rename(p("nope"), p("f")), syscall.ENOENT},
				{"SyncDir of a missing directory", fs.SyncDir(p("nope")), syscall.ENOENT},
			} {
				if !errors.Is(c.err, c.want) {
					t.Errorf("%s: %v, want %v", c.what, c.err, c.want)
				}
			}
			must(t, fs.Rename(p("d/sub"), p("moved"))) // a directory
			wantDir(t, fs, p("d"))
			wantDir(t, fs, p("moved"))
		})
	}
}

// What OS creates is for the server's user only: files 0o600,
// directories 0o700, whatever the umask lets through (nats-server's
// store permissions; other users of the host must not read messages).
func TestOSPermissions(t *testing.T) {
	fs := OS()
	dir := filepath.Join(t.TempDir(), "a", "b")
	if err := fs.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, p := range []string{filepath.Dir(dir), dir, filepath.Join(dir, "f")} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if m := st.Mode().Perm(); m&0o077 != 0 {
			t.Errorf("%s has mode %v: readable by others", p, m)
		}
	}
}

// TestInPlace: each InPlaceFS writes over what a file holds, extends it
// past its end (zero-filling a gap), appends with Write at its current
// end, and reads back what a second open sees.
func TestInPlace(t *testing.T) {
	for name, mk := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			fs, dir := mk()
			must(t, fs.MkdirAll(dir))
			ipfs, ok := fs.(InPlaceFS)
			if !ok {
				t.Fatalf("%T is not an InPlaceFS", fs)
			}
			name := path.Join(dir, "w")
			f := mustCreate(t, fs, name)
			write(t, f, "0000000000")
			must(t, f.Sync())
			must(t, f.Close())
			ip, err := ipfs.OpenInPlace(name)
			must(t, err)
			if _, err := ip.WriteAt([]byte("abc"), 2); err != nil {
				t.Fatal(err)
			}
			wantSize(t, ip, 10)
			if _, err := ip.WriteAt([]byte("xy"), 12); err != nil {
				t.Fatal(err)
			}
			write(t, ip, "!")
			wantReadAt(t, ip, 0, "00abc00000\x00\x00xy!", nil)
			must(t, ip.Sync())
			must(t, ip.Close())
			wantFile(t, fs, name, "00abc00000\x00\x00xy!")
			if _, err := ipfs.OpenInPlace(path.Join(dir, "missing")); !IsNotExist(err) {
				t.Errorf("OpenInPlace of a missing file: %v, want not-exist", err)
			}
		})
	}
}

// TestInPlaceFaultOverPlainFS: a FaultFS over an FS without in-place
// writes says so with errors.ErrUnsupported, which its users take as
// "append instead".
func TestInPlaceFaultOverPlainFS(t *testing.T) {
	fs := NewFaultFS(plainFS{NewCrashFS()})
	if _, err := fs.OpenInPlace("/f"); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("OpenInPlace over a plain FS: %v, want ErrUnsupported", err)
	}
}

// plainFS hides its FS's in-place writes, as a test wrapper embedding FS.
type plainFS struct{ FS }
