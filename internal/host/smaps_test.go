package host

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// A real smaps (sleep, a position-independent executable, on this machine's
// 6.18 kernel): every mapping read, and only the executable's unwritten
// read-only mappings are releasable — not its RELRO page, which the loader
// wrote before making it read-only (Anonymous: 4 kB), nor its data.
func TestParseSmapsCaptured(t *testing.T) {
	f, err := os.Open("testdata/smaps.sleep")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	maps, err := parseSmaps(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(maps) != 37 {
		t.Fatalf("%d mappings, want 37", len(maps))
	}
	first := Mapping{Start: 0x557b31897000, End: 0x557b31899000, Perms: "r--p", Path: "/usr/bin/sleep", Rss: 8 << 10}
	if maps[0] != first {
		t.Fatalf("first mapping %+v, want %+v", maps[0], first)
	}
	var got []string
	for _, m := range releasable(maps, "/usr/bin/sleep") {
		got = append(got, m.Perms)
	}
	if strings.Join(got, " ") != "r--p r-xp r--p" {
		t.Fatalf("releasable: %v, want the first three mappings of /usr/bin/sleep (r--p r-xp r--p)", got)
	}
	for _, m := range maps {
		if m.Path == "[heap]" && m.Anonymous == 0 {
			t.Fatalf("heap with no anonymous bytes: %+v", m)
		}
	}
}

func TestParseSmapsMalformed(t *testing.T) {
	for _, in := range []string{
		"Rss: 4 kB\n", // a field before any header
		"00400000-00300000 r-xp 00000000 fe:00 1 /bin/x\n",     // ends before it starts
		"0040000g-00500000 r-xp 00000000 fe:00 1 /bin/x\n",     // not hex
		"00400000-00500000 r-x 00000000 fe:00 1 /bin/x\n",      // three permission letters
		"00400000-00500000 rwxq 00000000 fe:00 1 /bin/x\n",     // neither private nor shared
		"00400000-00500000 r-xp 00000000 fe:00\n",              // no inode
		"00400000-00500000 r-xp 00000000 fe:00 1\nRss: 4 MB\n", // not kB
		"00400000-00500000 r-xp 00000000 fe:00 1\nRss: 99999999999999999 kB\n",
		"00400000-00500000 r-xp 00000000 fe:00 1\nno colon here\n",
	} {
		_, err := parseSmaps(strings.NewReader(in))
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%q: %v, want a *ParseError", in, err)
		}
	}
	// A path with spaces is the rest of the line.
	maps, err := parseSmaps(strings.NewReader("00400000-00500000 r-xp 00000000 fe:00 7   /opt/my app/evictd (deleted)\nRss: 4 kB\n"))
	if err != nil || len(maps) != 1 || maps[0].Path != "/opt/my app/evictd (deleted)" || maps[0].Rss != 4096 {
		t.Fatalf("%+v %v", maps, err)
	}
}

// On this process, for real: the executable's read-only mappings lose
// their resident pages, and the program runs on (what it runs again is
// mapped back).
func TestReleaseExecutablePages(t *testing.T) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	resident := func() uint64 {
		maps, err := ReadSmaps("/proc", "self")
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, m := range releasable(maps, exe) {
			n += m.Rss
		}
		return n
	}
	before := resident()
	released, err := ReleaseExecutablePages("/proc")
	if err != nil {
		t.Fatal(err)
	}
	after := resident()
	t.Logf("the test binary's read-only mappings: %d KiB resident before, %d KiB released, %d KiB after", before>>10, released>>10, after>>10)
	if released == 0 || after >= before {
		t.Fatalf("nothing released: %d KiB resident before, %d KiB released, %d KiB after", before>>10, released>>10, after>>10)
	}
}
