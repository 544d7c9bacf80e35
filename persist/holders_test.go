package persist_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boltinformer/boltinformer/persist"
)

// TestOpenOfAFileThisProcessHolds checks that a second Open of a file
// another DB of this process holds fails at once, saying so. It does not
// wait LockTimeout and blame another process. The same holds through
// another spelling of the path, a symlink. Closing the holder makes the
// file openable again.
func TestOpenOfAFileThisProcessHolds(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cache.db")
	link := filepath.Join(dir, "link.db")
	holder := openDB(t, path, persist.Options{})
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	// Long enough that a wait for it is no doubt a wait, short enough that
	// the test fails rather than hangs where Open still waits.
	const timeout = 3 * time.Second
	for _, p := range []string{path, link} {
		for _, readOnly := range []bool{false, true} {
			start := time.Now()
			db, err := persist.Open(p, persist.Options{LockTimeout: timeout, ReadOnly: readOnly})
			elapsed := time.Since(start)
			if err == nil {
				_ = db.Close()
				t.Fatalf("%s, readOnly=%v: opened a file another DB of this process holds", p, readOnly)
			}
			if !errors.Is(err, persist.ErrOpenInProcess) || !errors.Is(err, persist.ErrLocked) {
				t.Errorf("%s, readOnly=%v: err = %v, want ErrOpenInProcess and ErrLocked", p, readOnly, err)
			}
			for _, want := range []string{p, "this process", "for writing", "Close that DB"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s, readOnly=%v: error %q does not mention %q", p, readOnly, err, want)
				}
			}
			if strings.Contains(err.Error(), "another process") {
				t.Errorf("%s, readOnly=%v: error %q blames another process", p, readOnly, err)
			}
			if elapsed >= timeout/2 {
				t.Errorf("%s, readOnly=%v: failed after %v, about the whole LockTimeout; want at once", p, readOnly, elapsed)
			}
		}
	}
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	openDB(t, link, persist.Options{LockTimeout: timeout})
}

// TestReadersOfAFileThisProcessHolds: read-only DBs of one process share a
// file, as the lock lets them; a writer is refused at once.
func TestReadersOfAFileThisProcessHolds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	if err := openDB(t, path, persist.Options{}).Close(); err != nil {
		t.Fatal(err)
	}
	openDB(t, path, persist.Options{ReadOnly: true})
	openDB(t, path, persist.Options{ReadOnly: true})
	db, err := persist.Open(path, persist.Options{LockTimeout: 3 * time.Second})
	if err == nil {
		_ = db.Close()
		t.Fatal("opened for writing a file two read-only DBs of this process hold")
	}
	if !errors.Is(err, persist.ErrOpenInProcess) || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("err = %v, want ErrOpenInProcess naming a read-only holder", err)
	}
}

// TestOpenWaitsForAClosingDB: a DB of this process that is closing is about
// to release the file, so Open waits for it, as it would for the lock,
// instead of failing.
func TestOpenWaitsForAClosingDB(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	db := openDB(t, path, persist.Options{BatchInterval: time.Hour})
	c, err := db.Collection("configmaps", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	put(t, c, "1", cm("a", "1"))
	// The change is committed by Close; its observer holds Close there.
	inClose, release := make(chan struct{}), make(chan struct{})
	db.AddCommitObserver(func(persist.CommitStats) {
		close(inClose)
		<-release
	})
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	<-inClose

	waiting := make(chan struct{})
	opened := make(chan error, 1)
	go func() {
		db, err := persist.Open(path, persist.WithClaimWaiting(persist.Options{LockTimeout: time.Minute}, func(string) { close(waiting) }))
		if err == nil {
			err = db.Close()
		}
		opened <- err
	}()
	select {
	case <-waiting:
	case err := <-opened:
		t.Fatalf("Open while the holder was closing returned %v, want it to wait for the close", err)
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Errorf("Open once the holder closed: %v", err)
	}
}

// holdEnv names the file a child process (this test binary, see TestMain)
// opens and holds until its standard input closes.
const holdEnv = "PERSIST_TEST_HOLD_FILE"

// holdFile opens path in a child process and returns once it holds it.
func holdFile(t *testing.T, path string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("the child holding %s: %v", path, err)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "held\n" {
		t.Fatalf("the child holding %s said %q (%v)", path, line, err)
	}
}

// holdAndExit is the child of holdFile: it opens path, says "held", and
// closes it once its standard input closes.
func holdAndExit(path string) {
	db, err := persist.Open(path, persist.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("held")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	if err := db.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}
