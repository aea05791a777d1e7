package container

import (
	"context"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/container/internal/testenv"
)

// TestHomeUserIsTheWorkspace: a sandbox, from the engine or a zygote, sees
// its workspace at /home/user too: a file it writes there is the host's
// workspace path x, an input file is there, /home itself is read-only, and
// /workspace stays the cwd and HOME.
func TestHomeUserIsTheWorkspace(t *testing.T) {
	e := newTestEngine(t)
	code := `import os
open('/home/user/x', 'w').write('from home')
os.makedirs('/home/user/sub/deep')
print(open('/home/user/in.txt').read())
a, b = os.stat('/home/user'), os.stat('/workspace')
print('same', (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino), os.access('/home/user', os.W_OK))
try:
    open('/home/y', 'w'); print('home writable')
except OSError as e:
    print('home errno', e.errno)
print('cwd', os.getcwd(), os.environ.get('HOME'))
print('home', sorted(os.listdir('/home')))`
	for _, k := range sandboxKinds(t, e) {
		t.Run(k.name, func(t *testing.T) {
			sb, err := k.start(context.Background(), Spec{
				RootfsDir: testenv.Rootfs(t), Argv: []string{"python3", "-c", code},
				Files: []File{{Path: "in.txt", Data: []byte("host")}}, ReturnFiles: []string{"x"},
			})
			if err != nil {
				t.Fatal(err)
			}
			res, err := sb.Wait()
			if err != nil {
				t.Fatal(err)
			}
			out := mustOK(t, res)
			for _, want := range []string{"host\n", "same True True", "home errno 30", "cwd /workspace /workspace", "home ['user']"} {
				if !strings.Contains(out, want) {
					t.Errorf("missing %q in:\n%s", want, out)
				}
			}
			var found bool
			for _, f := range res.Files {
				if f.Path == "x" {
					found = string(f.Content) == "from home"
				}
			}
			if !found {
				t.Errorf("the host's workspace has no x written at /home/user/x: %+v", res.Files)
			}
		})
	}
}
