/* lib/layers/net.c — the network namespace: only a loopback interface.
 * A fresh network namespace has lo down; bringing it up lets programs use
 * loopback sockets (servers and clients inside one sandbox). No other
 * interface exists, so nothing leaves the sandbox. Child-safe. */
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "base/util.h"
#include "sandbox.h"

int ward_net_apply(struct ward_plan *plan, struct ward_error *err)
{
	(void)plan;
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return ward_error_setv(err, errno, "net", "unable to open a socket", NULL);
	memset(&ifr, 0, sizeof(ifr));
	ward_strlcpy(ifr.ifr_name, "lo", sizeof(ifr.ifr_name));
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		goto fail;
	ifr.ifr_flags = (short)(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
	if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		goto fail;
	close(fd);
	return 0;
fail:
	ward_error_setv(err, errno, "net", "unable to bring up 'lo'", NULL);
	close(fd);
	return -err->code;
}
