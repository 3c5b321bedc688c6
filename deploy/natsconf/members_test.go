package natsconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseMembers(t *testing.T) {
	const key = "UATDRDH3U7URFCT34LEE5UAAJW7UWE72SEXB5ASN3YC4LDKLQWEVRPL2"
	const key2 = "UCTOJ3DSCUBY7IMWFODVINM7LOD7G7FFOXFMLG344R3DMUKH3KY7TPVT"
	ms, err := ParseMembers([]byte("# comment\n\n1 " + key + "\n  7\t" + key2 + "  \n"))
	if err != nil || len(ms) != 2 || ms[0] != (Member{1, key}) || ms[1] != (Member{7, key2}) {
		t.Fatalf("ParseMembers: %v, %v", ms, err)
	}
	for _, c := range []struct{ in, want string }{
		{"", "no member"},
		{"1", "got 1 fields"},
		{"0 " + key, "positive"},
		{"x " + key, "positive"},
		{"1 SUAAA", "public user nkey"},
		{"1 " + key + "\n1 " + key2, "twice"},
		{"1 " + key + "\n2 " + key, "twice"},
		{"1 " + key + " extra", "got 3 fields"},
	} {
		if _, err := ParseMembers([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseMembers(%q): %v; want an error with %q", c.in, err, c.want)
		}
	}
}

// Generated keys read back as they were made, and the seeds are private.
func TestGenerateMembers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bully")
	made, err := GenerateMembers(dir, []uint64{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	read, err := ReadMembers(dir)
	if err != nil || len(read) != 3 {
		t.Fatalf("ReadMembers: %v, %v", read, err)
	}
	for i := range made {
		if read[i] != made[i] {
			t.Errorf("member %d: read %v, made %v", i, read[i], made[i])
		}
		fi, err := os.Stat(filepath.Join(dir, SeedFile(made[i].ID)))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("seed of %d: %v, %v; want mode 0600", made[i].ID, fi, err)
		}
		seed, _ := os.ReadFile(filepath.Join(dir, SeedFile(made[i].ID)))
		if !strings.HasPrefix(string(seed), "SU") {
			t.Errorf("seed of %d does not start with SU", made[i].ID)
		}
	}
	if _, err := GenerateMembers(dir, []uint64{1}); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("GenerateMembers over existing keys: %v; want refused", err)
	}
	if _, err := GenerateMembers(t.TempDir(), []uint64{1, 1}); err == nil {
		t.Error("GenerateMembers with a duplicate ID: no error")
	}
}

func TestRenderRefuses(t *testing.T) {
	const key = "UATDRDH3U7URFCT34LEE5UAAJW7UWE72SEXB5ASN3YC4LDKLQWEVRPL2"
	for _, c := range []struct {
		clusters map[string][]Member
		want     string
	}{
		{map[string][]Member{"a b": {{1, key}}}, "cluster name"},
		{map[string][]Member{"a": {{1, "nope"}}}, "valid public user key"},
		{map[string][]Member{"a": {{0, key}}}, "valid public user key"},
		{map[string][]Member{"a": {{1, key}}, "b": {{1, key}}}, "has the key of a/1"},
	} {
		if _, err := Render(c.clusters); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Render(%v): %v; want an error with %q", c.clusters, err, c.want)
		}
	}
	plain, err := Render(nil)
	if err != nil || strings.Contains(plain, "nkey:") || strings.Contains(plain, memberMarker) {
		t.Errorf("Render(nil): %v; want the password users alone", err)
	}
}
