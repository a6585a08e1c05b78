package host

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseFlockHolder(t *testing.T) {
	const locks = "1: POSIX  ADVISORY  WRITE 99 00:2a:5678 0 EOF\n" +
		"2: FLOCK  ADVISORY  WRITE 1234 00:2a:5678 0 EOF\n" +
		"2: -> FLOCK  ADVISORY  WRITE 1240 00:2a:5678 0 EOF\n" +
		"3: FLOCK  ADVISORY  READ 77 00:2a:9 0 EOF\n"
	for _, tc := range []struct {
		file  string
		pid   int
		found bool
	}{
		{"00:2a:5678", 1234, true},
		{"00:2a:9", 77, true},
		{"00:2b:5678", 0, false},
	} {
		pid, found, err := parseFlockHolder(strings.NewReader(locks), tc.file)
		if err != nil || pid != tc.pid || found != tc.found {
			t.Errorf("%s: got %d %v %v, want %d %v", tc.file, pid, found, err, tc.pid, tc.found)
		}
	}
	if _, _, err := parseFlockHolder(strings.NewReader("1: FLOCK ADVISORY WRITE x 00:2a:9 0 EOF\n"), "00:2a:9"); err == nil {
		t.Error("a PID that is not a number: no error")
	}
}

// On this kernel: a flock this process holds is found in /proc/locks under
// the file's FileID, with this PID, and the cmdline reader names us.
func TestReadFlockHolderReal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "lock")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	pid, found, err := ReadFlockHolder("/proc", FileID(unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino))
	if err != nil || !found || pid != os.Getpid() {
		t.Fatalf("ReadFlockHolder = %d %v %v, want %d true", pid, found, err, os.Getpid())
	}
	cmd, err := ReadCmdline("/proc", pid)
	if err != nil || !strings.Contains(cmd, os.Args[0]) {
		t.Fatalf("ReadCmdline = %q, %v; want it to contain %q", cmd, err, os.Args[0])
	}
	if _, err := ReadCmdline("/proc", 1<<22+1); err == nil {
		t.Error("cmdline of a PID that cannot exist: no error")
	}
}

func FuzzParseFlockHolder(f *testing.F) {
	f.Add([]byte("2: FLOCK  ADVISORY  WRITE 1234 00:2a:5678 0 EOF\n"), "00:2a:5678")
	f.Add([]byte("2: -> FLOCK  ADVISORY  WRITE 1240 00:2a:5678 0 EOF"), "00:2a:5678")
	f.Fuzz(func(t *testing.T, b []byte, file string) {
		pid, found, err := parseFlockHolder(strings.NewReader(string(b)), file)
		if err == nil && found && pid <= 0 {
			t.Fatalf("found holder with PID %d", pid)
		}
	})
}
