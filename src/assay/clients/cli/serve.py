"""`assay serve` and `assay keys create` (docs/deployment.md): the service on the embedded default or
PostgreSQL (`ASSAY_DATABASE_URL`), and org API keys minted straight into its database.

The service, store and SQLAlchemy are imported inside the commands: the `assay` entry point
registers these beside `assay verify`, which is offline and must not pay for the whole service
stack at start-up (importing it took longer than the verification itself). For the same reason
`serve`'s listener port flags are built from the surface registry only when `serve` itself is
parsed (`ServeCommand`), never when `assay` starts.
"""

from __future__ import annotations

import inspect
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperCommand

if TYPE_CHECKING:
    from typer._click import Context, Parameter  # typer's own click, which its commands are built on

    from assay.service.settings import Settings

__all__ = ["ServeCommand", "keys_app", "listener_port_flag", "serve"]

DataDir = Annotated[
    Path | None, typer.Option("--data-dir", help="Data directory (default ./.assay, or ASSAY_DATA_DIR).")
]


def _settings(data_dir: Path | None) -> Settings:
    """The settings from the environment; a malformed `ASSAY_*` number is exit 2 with its name."""
    from assay.service.settings import Settings

    try:
        settings = Settings.from_env()
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    return replace(settings, data_dir=data_dir) if data_dir is not None else settings


def _where(settings: Settings) -> str:
    from sqlalchemy.engine import make_url

    url = make_url(settings.resolved_database_url)
    return (
        url.render_as_string(hide_password=True) if url.get_backend_name() != "sqlite" else str(url.database)
    )


def serve(
    data_dir: DataDir = None,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="API port.")] = 8400,
    workers: Annotated[int, typer.Option(min=1, help="API worker processes.")] = 1,
    access_log: Annotated[
        bool, typer.Option(help="Print a line per HTTP request (off: it cost ~7% of an agent request).")
    ] = False,
) -> None:
    """Run the Assay API. Stops cleanly on Ctrl-C (SIGINT) or SIGTERM.

    Every agent request to a sandbox surface is in the run's event log whether or not the access
    log is on (uvicorn's per-request log line was a measurable share of the agent path)."""
    from assay.service.app import create_app
    from assay.service.server import run

    settings = _settings(data_dir)
    if not settings.listeners and 0 in settings.listener_ports.values():
        # An instance without listeners names the configured ports in the credentials it hands out
        # (docs/deployment.md); 0 would tell agents to connect to port 0.
        variables = " and ".join(settings.listener_port_variables())
        print(
            f"error: ASSAY_LISTENERS=0 needs {variables} set to the listener "
            "instance's ports (not 0): this instance's credentials name them",
            file=sys.stderr,
        )
        raise typer.Exit(2)
    os.environ["ASSAY_DATA_DIR"] = str(settings.data_dir.resolve())  # worker processes read it
    print(f"Assay API on http://{host}:{port}  (database: {_where(settings)})", file=sys.stderr)
    if settings.bootstrap_api_key:
        print("API key: the one in ASSAY_BOOTSTRAP_API_KEY", file=sys.stderr)
    else:
        hint = f" --data-dir {data_dir}" if data_dir else ""
        print(
            f"Get an API key: assay keys create{hint}  (or set ASSAY_BOOTSTRAP_API_KEY=vk_...)",
            file=sys.stderr,
        )
    settings = replace(settings, listen_host=host)
    os.environ["ASSAY_LISTEN_HOST"] = host
    if workers == 1:
        run(create_app(settings), host=host, port=port, access_log=access_log)
        return
    _serve_workers(settings, host=host, port=port, workers=workers, access_log=access_log)


def _serve_workers(settings: Settings, *, host: str, port: int, workers: int, access_log: bool) -> None:
    """N API workers plus, when a surface has a listener, one supervised listener process whose
    bound ports the workers are told (docs/deployment.md: listeners run once per deployment)."""
    from assay.service.listeners import ListenerSupervisor, needs_listener_process
    from assay.service.orphans import PARENT_PID
    from assay.service.server import run

    os.environ[PARENT_PID] = str(os.getpid())  # the workers and the listener process watch for us
    # `ASSAY_LISTENERS=0` on every instance but one of a scaled-out deployment (docs/deployment.md):
    # this instance starts no listener process; its credentials still name the configured ports.
    wanted = settings.listeners and needs_listener_process(settings)
    supervisor = ListenerSupervisor(settings) if wanted else None
    if supervisor is not None:
        try:
            ports = supervisor.start()
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise typer.Exit(1) from None
        os.environ.update(supervisor.worker_environment())
        for surface, bound in ports.items():
            print(f"{surface} listener on {host}:{bound}", file=sys.stderr)
    else:
        os.environ["ASSAY_LISTENERS"] = "0"
    try:
        run(
            "assay.service.app:create_app",
            host=host,
            port=port,
            workers=workers,
            worker_timeout=settings.worker_timeout,
            access_log=access_log,
        )
    finally:
        if supervisor is not None:
            supervisor.stop()


def listener_port_flag(variable: str) -> str:
    """The `serve` flag of a listener port set by `variable`: `ASSAY_MLLP_PORT` → `--mllp-port`."""
    return "--" + variable.removeprefix("ASSAY_").lower().replace("_", "-")


class ServeCommand(TyperCommand):
    """`serve` plus one flag per registered surface that declares a listener port, named after the
    port option's variable (`--mllp-port`, `--sftp-port`, `--<name>-port` for a surface that keeps
    `ASSAY_<NAME>_PORT`). A flag that is given sets that variable, which the settings then read
    like any other, and which `serve --workers N` hands on to its processes."""

    _built: tuple[dict[str, str], list[Parameter]] | None = None
    """Each flag's parameter name → the variable it sets, and the flags; built on first use."""

    def _port_flags(self) -> tuple[dict[str, str], list[Parameter]]:
        if self._built is None:
            self._built = _listener_port_flags()
        return self._built

    def get_params(self, ctx: Context) -> list[Parameter]:
        own = super().get_params(ctx)
        help_option = self.get_help_option(ctx)
        head = [param for param in own if param is not help_option]
        return [*head, *self._port_flags()[1], *([help_option] if help_option is not None else [])]

    def invoke(self, ctx: Context) -> Any:
        for name, variable in self._port_flags()[0].items():
            value = ctx.params.pop(name, None)
            if value is not None:
                os.environ[variable] = str(value)
        return super().invoke(ctx)


def _listener_port_flags() -> tuple[dict[str, str], list[Parameter]]:
    """The registry's listener ports as typer options (parameter name → variable, the options):
    typer builds them from a signature, so they read and check like `serve`'s own."""
    from assay.sandboxes.options import LISTENER_PORT, declared, variable_of
    from assay.sandboxes.registry import SURFACES

    variables: dict[str, str] = {}
    parameters: list[inspect.Parameter] = []
    for name, surface in SURFACES.items():
        spec = surface.options.get(LISTENER_PORT)
        if spec is None:
            continue
        variable = variable_of(name, LISTENER_PORT, spec)
        default = declared(spec).default
        hint = variable if default is None else f"{variable}, default {default}"
        option = typer.Option(listener_port_flag(variable), help=f"The {name} listener's port ({hint}).")
        key = f"{name}_listener_port"
        variables[key] = variable
        annotation = Annotated[int | None, option]
        parameters.append(
            inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)
        )

    def flags(**values: Any) -> None:
        """The listener port flags."""

    flags.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    flags.__annotations__ = {parameter.name: parameter.annotation for parameter in parameters}
    probe = typer.Typer(add_completion=False)
    probe.command()(flags)
    return variables, list(typer.main.get_command(probe).params)


keys_app = typer.Typer(help="Organization API keys.", no_args_is_help=True)


@keys_app.command("create")
def create_key(
    org: Annotated[
        str | None, typer.Option(help="Organization name, created when missing (default: `default`).")
    ] = None,
    name: Annotated[str | None, typer.Option(help="A label for the key.")] = None,
    data_dir: DataDir = None,
) -> None:
    """Mint an org API key (`vk_…`) and print it once, on stdout."""
    from assay.store import Database
    from assay.store.tokens import DEFAULT_ORG_NAME, ensure_org, mint_key

    if org is None:
        org = DEFAULT_ORG_NAME
    database = Database(_settings(data_dir).resolved_database_url)
    try:
        database.migrate()
        with database.transaction() as session:
            organization = ensure_org(session, org)
            minted = mint_key(session, organization.id, name=name)
            token, org_id = minted.token, organization.id
    finally:
        database.dispose()
    print(f"created key for organization {org} ({org_id}); it is shown only once:", file=sys.stderr)
    print(token)
