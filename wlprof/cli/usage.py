"""Usage errors (an unknown option, a missing argument, a value of the wrong type) worded as wlprof's own:
one `error:` line naming the argument, the rule and the value, with a close match where there is one.

Click's own suggestion picks poorly (`--bogus` -> `--out`); ours normalizes `_` to `-`, takes a unique
prefix, then a close match, and says when an option belongs to another `wlprof run` workload.
"""

from __future__ import annotations

import difflib
import re
import sys

import typer
from typer.core import TyperCommand, TyperGroup

try:  # newer typer carries its own copy of click
    from typer._click import exceptions as click_exc
except ImportError:  # pragma: no cover - older typer, over click
    from click import exceptions as click_exc


def close_option(name: str, options: list[str]) -> str | None:
    """The option `name` most likely meant, or None."""
    norm = name.split("=", 1)[0].lower().replace("_", "-")
    if not norm.startswith("--") and norm.startswith("-") and len(norm) > 2:
        norm = "-" + norm  # -steps -> --steps
    longs = [o for o in options if o.startswith("--")]
    if norm in options:
        return norm
    prefixed = [o for o in longs if o.startswith(norm) and len(norm) > 3]
    if len(prefixed) == 1:
        return prefixed[0]
    close = difflib.get_close_matches(norm, longs, n=1, cutoff=0.75)
    return close[0] if close else None


def _options(command) -> list[str]:
    out = []
    for p in getattr(command, "params", []):
        if getattr(p, "param_type_name", "") == "option":
            out += [*p.opts, *p.secondary_opts]
    return out


def _param_name(param, ctx) -> str:
    """How the user writes a parameter: --top, RUN_ID."""
    if getattr(param, "param_type_name", "") == "option":
        longs = [o for o in param.opts if o.startswith("--")]
        return (longs or list(param.opts))[0]
    return (param.metavar or param.name or "ARGUMENT").upper().rstrip(".")


def _bad_value(exc):
    """The value a BadParameter refused, where the error carries it (typer's pydantic coercion does)."""
    cause = exc.__cause__
    try:
        return cause.errors()[0]["input"]
    except (AttributeError, IndexError, KeyError, TypeError):
        return None


def _command_path(ctx) -> str:
    """'wlprof run gemm' (whatever name the program was started under)."""
    if ctx is None:
        return "wlprof"
    return " ".join(["wlprof", *ctx.command_path.split()[1:]])


def _elsewhere(name: str, ctx) -> str | None:
    """'--batch is an option of wlprof run mlp' when the option belongs to another run workload."""
    parent = ctx.parent if ctx is not None else None
    if parent is None or not hasattr(parent.command, "commands") or parent.info_name != "run":
        return None
    flag = name.split("=", 1)[0].replace("_", "-")
    owners = [n for n, c in sorted(parent.command.commands.items())
              if c is not ctx.command and flag in _options(c)]
    return f"{flag} is an option of {', '.join(f'wlprof run {o}' for o in owners)}" if owners else None


# the error a group given no command raises after showing its help (a click that lacks it raises none)
NO_ARGS_IS_HELP = getattr(click_exc, "NoArgsIsHelpError", ())


def message(exc) -> str:
    """The one-line text of a click usage error, as wlprof words its own errors."""
    ctx = getattr(exc, "ctx", None)
    cmd = _command_path(ctx)
    if isinstance(exc, click_exc.NoSuchOption):
        opts = _options(ctx.command) if ctx is not None else []
        shown = [o for o in opts if o.startswith("--") and o != "--help"]
        subs = sorted(getattr(ctx.command, "commands", None) or {}) if ctx is not None else []
        if subs and not shown:  # a group (`wlprof`, `wlprof run`): its commands take the options
            text = (f"{exc.option_name} is not an option of `{cmd}`: name a command first (`{cmd} COMMAND "
                    f"[OPTIONS]`, COMMAND one of {', '.join(subs)}; see `{cmd} --help`)")
            owners = [n for n in subs if exc.option_name.split("=", 1)[0] in _options(ctx.command.commands[n])]
            if owners:
                text += f"; {exc.option_name.split('=', 1)[0]} is an option of " + ", ".join(
                    f"{cmd} {o}" for o in owners)
            return text
        text = (f"{exc.option_name} is not an option of `{cmd}` (options: {', '.join(shown)}; "
                f"see `{cmd} --help`)")
        guess = close_option(exc.option_name, opts)
        hint = f"did you mean {guess}?" if guess else _elsewhere(exc.option_name, ctx)
        return f"{text}; {hint}" if hint else text
    if isinstance(exc, click_exc.MissingParameter) and exc.param is not None:
        return f"{_param_name(exc.param, ctx)} is required (see `{cmd} --help`)"
    if isinstance(exc, click_exc.BadParameter) and exc.param is not None:
        rule = exc.message[:1].lower() + exc.message[1:].rstrip(".")
        value = _bad_value(exc)
        quoted = re.match(r"'(.*)' is not a valid ", rule)  # click's own conversion names the value
        if value is None and quoted:
            value = quoted.group(1)
        if re.search(r"valid int(eger)?\b", rule):  # click's wordings: 'a valid integer', 'a valid int'
            rule = "must be an integer"
        elif re.search(r"valid (number|float)\b", rule):
            rule = "must be a number"
        from wlprof.errors import shown as typed

        got = f" (got {typed(value)})" if value is not None else ""
        sep = " " if rule.startswith("must") else ": "
        return f"{_param_name(exc.param, ctx)}{sep}{rule}{got} (see `{cmd} --help`)"
    text = exc.format_message()
    text = text[:1].lower() + text[1:]
    if isinstance(exc, click_exc.UsageError):
        return f"{text.rstrip('.')} (see `{cmd} --help`)"
    return text


def _flags_say_their_default(params) -> None:
    """An on/off flag shows no value type (typer's `<bool>`) and says it is off unless given."""
    for p in params:
        if getattr(p, "param_type_name", "") != "option" or not getattr(p, "is_flag", False):
            continue
        if p.metavar is None:
            p.metavar = ""
        if p.help and "Default" not in p.help and p.default is False and not p.secondary_opts:
            p.help = p.help.rstrip() + " Default: off."


class WlprofCommand(TyperCommand):
    """A command whose flags show no value type and say their default."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _flags_say_their_default(self.params)

    def get_help_option(self, ctx):
        opt = super().get_help_option(ctx)
        if opt is not None:
            opt.metavar = ""
        return opt


class WlprofGroup(TyperGroup):
    """The `wlprof` group: usage errors of any command below it become one `error:` line (exit 2)."""

    def get_help_option(self, ctx):
        opt = super().get_help_option(ctx)
        if opt is not None:
            opt.metavar = ""
        return opt

    # `wlprof --help` lists the commands in the order a user meets them (the rest after, by name)
    ORDER = ("run", "sweep", "ls", "show", "compare", "report", "roofline", "calibrate", "ingest", "overlap",
             "predict", "profile", "place")

    def list_commands(self, ctx):
        names = super().list_commands(ctx)
        if ctx.info_name == "run":
            return names
        rank = {n: i for i, n in enumerate(self.ORDER)}
        return sorted(names, key=lambda n: (rank.get(n, len(rank)), n))

    def resolve_command(self, ctx, args):
        from wlprof.errors import did_you_mean, shown

        if args and args[0] not in self.commands and not args[0].startswith("-"):
            hint = did_you_mean(args[0], self.commands)
            label = "WORKLOAD" if ctx.info_name == "run" else "COMMAND"
            typer.echo(f"error: {label} must be one of {', '.join(sorted(self.commands))} (got {shown(args[0])})"
                       + (f"; {hint}" if hint else ""), err=True)
            raise typer.Exit(2)
        return super().resolve_command(ctx, args)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args=args, prog_name=prog_name, complete_var=complete_var,
                                standalone_mode=False, **extra)
        try:
            rv = super().main(args=args, prog_name=prog_name, complete_var=complete_var, standalone_mode=False,
                              **extra)
        except NO_ARGS_IS_HELP:  # `wlprof`, `wlprof run` alone: their help, already shown, is the answer
            sys.exit(0)
        except click_exc.ClickException as exc:
            typer.echo(f"error: {message(exc)}", err=True)
            sys.exit(exc.exit_code)
        except typer.Abort:
            typer.echo("aborted", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)
