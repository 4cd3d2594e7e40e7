// etcd at the version k8s.io/kubernetes requires. `go install go.etcd.io/etcd/server/v3` is refused
// (that module has replace directives), so it is built from this module's graph instead.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
