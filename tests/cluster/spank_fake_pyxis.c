/*
 * fake_pyxis: a SPANK plugin that stands in for NVIDIA pyxis on the gymbuild test cluster.
 *
 * It registers pyxis's command-line options for srun (local), sbatch/salloc (allocator) and
 * slurmstepd (remote), so scripts written for pyxis are accepted unchanged. There are no container
 * images here, so a step runs on the host. What the step asked for is recorded, for tests:
 *
 *   - in the task environment: FAKE_PYXIS_IMAGE, FAKE_PYXIS_MOUNTS, FAKE_PYXIS_WORKDIR,
 *     FAKE_PYXIS_NAME, FAKE_PYXIS_ENV, FAKE_PYXIS_NO_MOUNT_HOME=1 / FAKE_PYXIS_MOUNT_HOME=1,
 *     FAKE_PYXIS_REMAP_ROOT=1 / FAKE_PYXIS_NO_REMAP_ROOT=1, FAKE_PYXIS_NO_ENTRYPOINT=1 /
 *     FAKE_PYXIS_ENTRYPOINT=1 (values inherited from an enclosing step are removed first);
 *   - as one JSON line per node of the step, appended to
 *       <step working directory>/.fake-pyxis/<jobid>.<stepid>.json   (only for steps that used a
 *                                                                     container option)
 *       /var/lib/gymbuild-cluster/fake-pyxis/<jobid>.<stepid>.json   (every step)
 *     where <stepid> is the step number, or "batch" / "interactive".
 *
 * Like pyxis (through enroot), a task fails when a --container-mounts source does not exist or an
 * entry is malformed (the record is written first). --container-workdir is honoured by changing into it before the task runs.
 *
 * Build: tests/cluster/build-plugin. Loaded through /etc/slurm/plugstack.conf.d/fake-pyxis.conf.
 */

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

SPANK_PLUGIN(fake_pyxis, 1)

#define CENTRAL_RECORD_DIR "/var/lib/gymbuild-cluster/fake-pyxis"
#define LOCAL_RECORD_DIR ".fake-pyxis"

/* -1: not given; 0/1: the --no-X / --X flag was given. */
struct args {
	char *image;
	char *mounts;
	char *workdir;
	char *name;
	char *save;
	char *env;
	int mount_home;
	int remap_root;
	int entrypoint;
	int writable;
};

static struct args args = {
	.mount_home = -1,
	.remap_root = -1,
	.entrypoint = -1,
	.writable = -1,
};

enum opt_id {
	OPT_IMAGE,
	OPT_MOUNTS,
	OPT_WORKDIR,
	OPT_NAME,
	OPT_SAVE,
	OPT_ENV,
	OPT_MOUNT_HOME,
	OPT_NO_MOUNT_HOME,
	OPT_REMAP_ROOT,
	OPT_NO_REMAP_ROOT,
	OPT_ENTRYPOINT,
	OPT_NO_ENTRYPOINT,
	OPT_WRITABLE,
	OPT_READONLY,
};

static void set_string(char **slot, const char *value)
{
	free(*slot);
	*slot = strdup(value ? value : "");
}

/*
 * Slurm forwards one value per option to the remote side (the last one given), and may call a
 * callback more than once for the same value there, so every option keeps its last value.
 */
static int option_cb(int val, const char *optarg, int remote)
{
	(void)remote;
	switch (val) {
	case OPT_IMAGE:
		if (optarg == NULL || *optarg == '\0') {
			slurm_error("pyxis: --container-image: empty image");
			return -1;
		}
		set_string(&args.image, optarg);
		break;
	case OPT_MOUNTS:
		if (optarg == NULL || *optarg == '\0') {
			slurm_error("pyxis: --container-mounts: empty mount list");
			return -1;
		}
		set_string(&args.mounts, optarg);
		break;
	case OPT_WORKDIR:
		set_string(&args.workdir, optarg);
		break;
	case OPT_NAME:
		set_string(&args.name, optarg);
		break;
	case OPT_SAVE:
		set_string(&args.save, optarg);
		break;
	case OPT_ENV:
		set_string(&args.env, optarg);
		break;
	case OPT_MOUNT_HOME:
		args.mount_home = 1;
		break;
	case OPT_NO_MOUNT_HOME:
		args.mount_home = 0;
		break;
	case OPT_REMAP_ROOT:
		args.remap_root = 1;
		break;
	case OPT_NO_REMAP_ROOT:
		args.remap_root = 0;
		break;
	case OPT_ENTRYPOINT:
		args.entrypoint = 1;
		break;
	case OPT_NO_ENTRYPOINT:
		args.entrypoint = 0;
		break;
	case OPT_WRITABLE:
		args.writable = 1;
		break;
	case OPT_READONLY:
		args.writable = 0;
		break;
	default:
		return -1;
	}
	return 0;
}

static struct spank_option options[] = {
	{"container-image", "[USER@][REGISTRY#]IMAGE[:TAG]|PATH",
	 "[pyxis] the image to use for the container filesystem", 1, OPT_IMAGE, option_cb},
	{"container-mounts", "SRC:DST[:FLAGS][,SRC:DST...]",
	 "[pyxis] bind mount[s] inside the container", 1, OPT_MOUNTS, option_cb},
	{"container-workdir", "PATH", "[pyxis] working directory inside the container", 1, OPT_WORKDIR,
	 option_cb},
	{"container-name", "NAME", "[pyxis] name to use for saving and loading the container", 1,
	 OPT_NAME, option_cb},
	{"container-save", "PATH", "[pyxis] save the container state to a squashfs file", 1, OPT_SAVE,
	 option_cb},
	{"container-env", "NAME[,NAME...]",
	 "[pyxis] names of environment variables to override with the host values", 1, OPT_ENV,
	 option_cb},
	{"container-mount-home", NULL, "[pyxis] bind mount the user's home directory", 0, OPT_MOUNT_HOME,
	 option_cb},
	{"no-container-mount-home", NULL, "[pyxis] do not bind mount the user's home directory", 0,
	 OPT_NO_MOUNT_HOME, option_cb},
	{"container-remap-root", NULL, "[pyxis] ask to be remapped to root inside the container", 0,
	 OPT_REMAP_ROOT, option_cb},
	{"no-container-remap-root", NULL, "[pyxis] do not remap to root inside the container", 0,
	 OPT_NO_REMAP_ROOT, option_cb},
	{"container-entrypoint", NULL, "[pyxis] execute the entrypoint from the container image", 0,
	 OPT_ENTRYPOINT, option_cb},
	{"no-container-entrypoint", NULL, "[pyxis] do not execute the entrypoint from the image", 0,
	 OPT_NO_ENTRYPOINT, option_cb},
	{"container-writable", NULL, "[pyxis] make the container filesystem writable", 0, OPT_WRITABLE,
	 option_cb},
	{"container-readonly", NULL, "[pyxis] make the container filesystem read-only", 0, OPT_READONLY,
	 option_cb},
	SPANK_OPTIONS_TABLE_END};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	spank_context_t ctx = spank_context();
	if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR && ctx != S_CTX_REMOTE)
		return 0;
	for (struct spank_option *o = options; o->name != NULL; o++) {
		spank_err_t rc = spank_option_register(sp, o);
		if (rc != ESPANK_SUCCESS) {
			slurm_error("fake_pyxis: cannot register --%s: %s", o->name, spank_strerror(rc));
			return -1;
		}
	}
	return 0;
}

static int any_container_option(void)
{
	return args.image || args.mounts || args.workdir || args.name || args.save || args.env ||
	       args.mount_home >= 0 || args.remap_root >= 0 || args.entrypoint >= 0 ||
	       args.writable >= 0;
}

/* Checks every mount entry as enroot would: SRC[:DST[:FLAGS]], SRC an existing path. */
static int check_mounts(void)
{
	if (args.mounts == NULL)
		return 0;
	char *copy = strdup(args.mounts);
	if (copy == NULL)
		return -1;
	int rc = 0;
	char *save = NULL;
	for (char *entry = strtok_r(copy, ",", &save); entry != NULL;
	     entry = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(entry, ':');
		size_t srclen = colon ? (size_t)(colon - entry) : strlen(entry);
		char src[PATH_MAX];
		if (srclen == 0 || srclen >= sizeof(src)) {
			slurm_error("pyxis: invalid mount entry: '%s'", entry);
			rc = -1;
			break;
		}
		memcpy(src, entry, srclen);
		src[srclen] = '\0';
		if (colon != NULL && colon[1] == '\0') {
			slurm_error("pyxis: invalid mount entry: '%s'", entry);
			rc = -1;
			break;
		}
		struct stat st;
		/* Relative sources and tmpfs-like names are not bind mounts: leave them to the image. */
		if (src[0] == '/' && stat(src, &st) != 0) {
			slurm_error("pyxis: container start failed: mount source %s: %s", src,
				    strerror(errno));
			rc = -1;
			break;
		}
	}
	free(copy);
	return rc;
}

/* --- JSON output ---------------------------------------------------------------------------- */

struct buf {
	char *data;
	size_t len;
	size_t cap;
};

static void buf_add(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		size_t room = b->cap - b->len;
		va_start(ap, fmt);
		int n = vsnprintf(b->data ? b->data + b->len : NULL, b->data ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if (b->data && (size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = b->cap ? b->cap : 1024;
		while (cap < b->len + (size_t)n + 1)
			cap *= 2;
		char *grown = realloc(b->data, cap);
		if (grown == NULL)
			return;
		b->data = grown;
		b->cap = cap;
	}
}

static void buf_json_string(struct buf *b, const char *s)
{
	if (s == NULL) {
		buf_add(b, "null");
		return;
	}
	buf_add(b, "\"");
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"':
			buf_add(b, "\\\"");
			break;
		case '\\':
			buf_add(b, "\\\\");
			break;
		case '\n':
			buf_add(b, "\\n");
			break;
		case '\r':
			buf_add(b, "\\r");
			break;
		case '\t':
			buf_add(b, "\\t");
			break;
		default:
			if (*p < 0x20)
				buf_add(b, "\\u%04x", *p);
			else
				buf_add(b, "%c", *p);
		}
	}
	buf_add(b, "\"");
}

static void buf_json_tristate(struct buf *b, int v)
{
	buf_add(b, v < 0 ? "null" : (v ? "true" : "false"));
}

/* A comma-separated list as a JSON array of strings. */
static void buf_json_list(struct buf *b, const char *list)
{
	if (list == NULL) {
		buf_add(b, "[]");
		return;
	}
	char *copy = strdup(list);
	char *save = NULL;
	int first = 1;
	buf_add(b, "[");
	for (char *item = copy ? strtok_r(copy, ",", &save) : NULL; item != NULL;
	     item = strtok_r(NULL, ",", &save)) {
		buf_add(b, first ? "" : ",");
		buf_json_string(b, item);
		first = 0;
	}
	buf_add(b, "]");
	free(copy);
}

static void step_name(uint32_t stepid, char *out, size_t len)
{
	if (stepid == SLURM_BATCH_SCRIPT)
		snprintf(out, len, "batch");
	else if (stepid == SLURM_INTERACTIVE_STEP)
		snprintf(out, len, "interactive");
	else if (stepid == SLURM_EXTERN_CONT)
		snprintf(out, len, "extern");
	else
		snprintf(out, len, "%u", stepid);
}

static int append_line(const char *dir, const char *file, const char *line, size_t len)
{
	char path[PATH_MAX];
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return -1;
	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return -1;
	FILE *f = fopen(path, "a");
	if (f == NULL)
		return -1;
	/* One write of a whole line in append mode: lines from both nodes do not interleave. */
	setvbuf(f, NULL, _IOFBF, len + 1);
	size_t written = fwrite(line, 1, len, f);
	int rc = fclose(f);
	return (written == len && rc == 0) ? 0 : -1;
}

static void write_record(spank_t sp, const char *cwd)
{
	uint32_t jobid = 0, stepid = 0, nnodes = 0, nodeid = 0, ntasks = 0, local = 0;
	char node[256] = "";
	char step[32];
	int argc = 0;
	char **argv = NULL;

	spank_get_item(sp, S_JOB_ID, &jobid);
	spank_get_item(sp, S_JOB_STEPID, &stepid);
	spank_get_item(sp, S_JOB_NNODES, &nnodes);
	spank_get_item(sp, S_JOB_NODEID, &nodeid);
	spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &ntasks);
	spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &local);
	spank_get_item(sp, S_JOB_ARGV, &argc, &argv);
	if (spank_getenv(sp, "SLURMD_NODENAME", node, sizeof(node)) != ESPANK_SUCCESS)
		gethostname(node, sizeof(node) - 1);
	step_name(stepid, step, sizeof(step));

	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);

	struct buf b = {0};
	buf_add(&b, "{\"job_id\":%u,\"step_id\":", jobid);
	buf_json_string(&b, step);
	buf_add(&b, ",\"node\":");
	buf_json_string(&b, node);
	buf_add(&b, ",\"node_id\":%u,\"nnodes\":%u,\"ntasks\":%u,\"local_tasks\":%u", nodeid, nnodes,
		ntasks, local);
	buf_add(&b, ",\"image\":");
	buf_json_string(&b, args.image);
	buf_add(&b, ",\"mounts\":");
	buf_json_list(&b, args.mounts);
	buf_add(&b, ",\"workdir\":");
	buf_json_string(&b, args.workdir);
	buf_add(&b, ",\"name\":");
	buf_json_string(&b, args.name);
	buf_add(&b, ",\"save\":");
	buf_json_string(&b, args.save);
	buf_add(&b, ",\"env\":");
	buf_json_list(&b, args.env);
	buf_add(&b, ",\"mount_home\":");
	buf_json_tristate(&b, args.mount_home);
	buf_add(&b, ",\"remap_root\":");
	buf_json_tristate(&b, args.remap_root);
	buf_add(&b, ",\"entrypoint\":");
	buf_json_tristate(&b, args.entrypoint);
	buf_add(&b, ",\"writable\":");
	buf_json_tristate(&b, args.writable);
	buf_add(&b, ",\"cwd\":");
	buf_json_string(&b, cwd);
	buf_add(&b, ",\"argv\":[");
	for (int i = 0; i < argc && argv != NULL; i++) {
		buf_add(&b, i ? "," : "");
		buf_json_string(&b, argv[i]);
	}
	buf_add(&b, "],\"time\":%lld.%03ld}\n", (long long)now.tv_sec, now.tv_nsec / 1000000);
	if (b.data == NULL)
		return;

	char file[96];
	snprintf(file, sizeof(file), "%u.%s.json", jobid, step);
	if (append_line(CENTRAL_RECORD_DIR, file, b.data, b.len) != 0)
		slurm_error("fake_pyxis: cannot write %s/%s: %s", CENTRAL_RECORD_DIR, file,
			    strerror(errno));
	if (any_container_option() && cwd != NULL) {
		char dir[PATH_MAX];
		if (snprintf(dir, sizeof(dir), "%s/%s", cwd, LOCAL_RECORD_DIR) < (int)sizeof(dir) &&
		    append_line(dir, file, b.data, b.len) != 0)
			slurm_error("fake_pyxis: cannot write %s/%s: %s", dir, file, strerror(errno));
	}
	free(b.data);
}

static void set_env(spank_t sp, const char *name, const char *value)
{
	if (value != NULL)
		spank_setenv(sp, name, value, 1);
}

static void set_flag(spank_t sp, int v, const char *if_true, const char *if_false)
{
	if (v == 1)
		spank_setenv(sp, if_true, "1", 1);
	else if (v == 0)
		spank_setenv(sp, if_false, "1", 1);
}

static const char *env_names[] = {
	"FAKE_PYXIS_IMAGE",	     "FAKE_PYXIS_MOUNTS",	 "FAKE_PYXIS_WORKDIR",
	"FAKE_PYXIS_NAME",	     "FAKE_PYXIS_SAVE",		 "FAKE_PYXIS_ENV",
	"FAKE_PYXIS_MOUNT_HOME",     "FAKE_PYXIS_NO_MOUNT_HOME", "FAKE_PYXIS_REMAP_ROOT",
	"FAKE_PYXIS_NO_REMAP_ROOT",  "FAKE_PYXIS_ENTRYPOINT",	 "FAKE_PYXIS_NO_ENTRYPOINT",
	"FAKE_PYXIS_WRITABLE",	     "FAKE_PYXIS_READONLY",	 NULL};

/* Runs in each task, as the job user, just before the task's program is executed. */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (spank_context() != S_CTX_REMOTE)
		return 0;

	for (const char **n = env_names; *n != NULL; n++)
		spank_unsetenv(sp, *n);
	set_env(sp, "FAKE_PYXIS_IMAGE", args.image);
	set_env(sp, "FAKE_PYXIS_MOUNTS", args.mounts);
	set_env(sp, "FAKE_PYXIS_WORKDIR", args.workdir);
	set_env(sp, "FAKE_PYXIS_NAME", args.name);
	set_env(sp, "FAKE_PYXIS_SAVE", args.save);
	set_env(sp, "FAKE_PYXIS_ENV", args.env);
	set_flag(sp, args.mount_home, "FAKE_PYXIS_MOUNT_HOME", "FAKE_PYXIS_NO_MOUNT_HOME");
	set_flag(sp, args.remap_root, "FAKE_PYXIS_REMAP_ROOT", "FAKE_PYXIS_NO_REMAP_ROOT");
	set_flag(sp, args.entrypoint, "FAKE_PYXIS_ENTRYPOINT", "FAKE_PYXIS_NO_ENTRYPOINT");
	set_flag(sp, args.writable, "FAKE_PYXIS_WRITABLE", "FAKE_PYXIS_READONLY");

	int taskid = -1;
	spank_get_item(sp, S_TASK_ID, &taskid);
	char cwd[PATH_MAX];
	const char *where = getcwd(cwd, sizeof(cwd)) ? cwd : NULL;
	if (taskid == 0)
		write_record(sp, where);

	/* Where pyxis would start the container: a bad mount fails the task, as with enroot. */
	if (check_mounts() != 0)
		return -1;

	if (args.workdir != NULL && *args.workdir != '\0') {
		if (chdir(args.workdir) != 0) {
			slurm_error("pyxis: couldn't chdir to %s: %s", args.workdir, strerror(errno));
			return -1;
		}
		spank_setenv(sp, "PWD", args.workdir, 1);
	}
	return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	(void)sp;
	(void)ac;
	(void)av;
	free(args.image);
	free(args.mounts);
	free(args.workdir);
	free(args.name);
	free(args.save);
	free(args.env);
	memset(&args, 0, sizeof(args));
	args.mount_home = args.remap_root = args.entrypoint = args.writable = -1;
	return 0;
}
