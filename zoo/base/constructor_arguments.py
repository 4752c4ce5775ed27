"""`ArgumentsOf`: a class's constructor arguments, taken by another class.

A zoo task is built either from a backbone
(`Transformer(backbone=TransformerBackbone(...))`, as in keras-hub) or from
the backbone's own arguments (`Transformer(100, num_layers=2)`), and its
`get_config` lists those arguments flat, as configs saved before the
backbones existed do. `RecurrentAttentionBackbone` takes the arguments of
its `RecurrentAttention` layer the same way. `ArgumentsOf` does this once
for all of them: it reads the names, their order and defaults from the
wrapped class's signature, so each argument is written in one place, the
class that uses it.
"""

import inspect

import keras

#: The `keras.Model` arguments a zoo model takes besides its own.
MODEL_ARGUMENTS = ("name", "trainable")

# Never passed through: the wrapper's own `keras.Model` arguments.
_OWN = ("self", "name", "trainable", "dtype")


def check_model_arguments(owner, kwargs):
    """Refuses keyword arguments that are not `keras.Model`'s `name` / `trainable`.

    A functional `keras.Model` silently ignores unknown keyword arguments,
    so a misspelt one (`unit=8`) would be lost; this names it.

    Args:
        owner: str. The class named in the error.
        kwargs: dict. The keyword arguments left for `keras.Model`.

    Raises:
        TypeError: naming the unknown arguments.

    Example:
    >>> check_model_arguments("Seq2SeqBackbone", {"name": "b", "unit": 8})
    Traceback (most recent call last):
    ...
    TypeError: Seq2SeqBackbone got unexpected keyword arguments: unit. Received: unit=8
    """
    unknown = [name for name in kwargs if name not in MODEL_ARGUMENTS]
    if unknown:
        received = ", ".join(f"{name}={kwargs[name]!r:.80}" for name in unknown)
        raise TypeError(
            f"{owner} got unexpected keyword arguments: {', '.join(unknown)}. "
            f"Received: {received}"
        )


class ArgumentsOf:
    """The constructor arguments of `cls`, as another constructor takes them.

    The names are those of `cls`'s signature (minus `name`, `trainable`
    and `dtype`, the wrapper's own), in order, with `renamed` ones under
    the wrapper's names. A class that passes arguments of another class
    through its `**kwargs` says so with a class attribute `passed_arguments`
    (an `ArgumentsOf`); their names count as its own.

    Args:
        cls: the class whose arguments are taken.
        renamed: optional dict `{wrapper's name: cls's name}`.

    Example:
    >>> class Inner:
    ...     def __init__(self, units, depth=2, name=None):
    ...         self.units, self.depth = units, depth
    ...     def get_config(self):
    ...         return {"units": self.units, "depth": self.depth}
    >>> arguments = ArgumentsOf(Inner, renamed={"layers": "depth"})
    >>> arguments.names
    ('units', 'layers')
    >>> kwargs = {"layers": 3, "name": "outer"}
    >>> given = arguments.take("Outer", (8,), kwargs)
    >>> given, kwargs
    ({'units': 8, 'layers': 3}, {'name': 'outer'})
    >>> arguments.config(arguments.build(given))
    {'units': 8, 'layers': 3}
    >>> arguments.take("Outer", (), {"unit": 8})
    Traceback (most recent call last):
    ...
    TypeError: Outer got unexpected keyword arguments: unit. Received: unit=8
    """

    def __init__(self, cls, renamed=None):
        self.cls = cls
        self.renamed = dict(renamed or {})
        ours = {theirs: mine for mine, theirs in self.renamed.items()}
        # Our name -> cls's parameter; positional: the names, in order, that
        # may be given by position.
        self.parameters = {}
        positional = []
        passed = getattr(cls, "passed_arguments", None)
        for parameter in inspect.signature(cls.__init__).parameters.values():
            if parameter.kind is parameter.VAR_POSITIONAL and passed is not None:
                for name in passed.names:
                    self.parameters[ours.get(name, name)] = passed.parameters[name]
                positional.extend(ours.get(name, name) for name in passed.positional)
            if parameter.name in _OWN or parameter.kind in (
                parameter.VAR_POSITIONAL,
                parameter.VAR_KEYWORD,
            ):
                continue
            name = ours.get(parameter.name, parameter.name)
            self.parameters[name] = parameter
            if parameter.kind is parameter.POSITIONAL_OR_KEYWORD:
                positional.append(name)
        self.positional = tuple(positional)

    @property
    def names(self):
        """The argument names, as the wrapper takes them.

        Example:
        >>> ArgumentsOf(keras.layers.Dense).names[:3]
        ('units', 'activation', 'use_bias')
        >>> ArgumentsOf(keras.layers.Dense, renamed={"width": "units"}).names[:2]
        ('width', 'activation')
        """
        return tuple(self.parameters)

    def take(self, owner, args, kwargs):
        """Takes the arguments of `cls` out of a wrapper's `args` and `kwargs`.

        Positional arguments are matched to the names in `cls`'s order;
        what is left in `kwargs` must be `keras.Model`'s `name` or
        `trainable`.

        Args:
            owner: str. The wrapper's class name, for error messages.
            args: tuple. The wrapper's positional arguments.
            kwargs: dict. The wrapper's keyword arguments; the arguments of
                `cls` are removed from it.

        Returns:
            dict `{name: value}` of the arguments given, under the
            wrapper's names.

        Raises:
            TypeError: too many positional arguments, an argument given
                twice, or an unknown keyword argument (named).

        Example:
        >>> arguments = ArgumentsOf(keras.layers.Dense, renamed={"width": "units"})
        >>> kwargs = {"activation": "relu", "name": "head"}
        >>> arguments.take("Head", (4,), kwargs), kwargs  # `name` is the wrapper's
        ({'width': 4, 'activation': 'relu'}, {'name': 'head'})
        >>> arguments.take("Head", (4,), {"width": 5})
        Traceback (most recent call last):
        ...
        TypeError: Head got multiple values for argument `width`
        """
        if len(args) > len(self.positional):
            raise TypeError(
                f"{owner} takes at most {len(self.positional)} positional "
                f"arguments ({', '.join(self.positional)}). Received: "
                f"{len(args)} positional arguments"
            )
        given = dict(zip(self.positional, args))
        for name in self.names:
            if name not in kwargs:
                continue
            if name in given:
                raise TypeError(f"{owner} got multiple values for argument `{name}`")
            given[name] = kwargs.pop(name)
        check_model_arguments(owner, kwargs)
        return given

    def build(self, given, **extra):
        """`cls(...)` from the arguments given (the wrapper's names).

        A required argument that was not given is passed as `None`, so that
        `cls` names it in its own error.

        Args:
            given: dict from `take`.
            **extra: more `cls` arguments (e.g. `dtype`, `name`).

        Example:
        >>> arguments = ArgumentsOf(keras.layers.Dense, renamed={"width": "units"})
        >>> layer = arguments.build({"width": 4, "use_bias": False}, name="head")
        >>> type(layer).__name__, layer.units, layer.use_bias, layer.name
        ('Dense', 4, False, 'head')
        """
        arguments = {
            p.name: None
            for p in self.parameters.values()
            if p.default is inspect.Parameter.empty
        }
        for name, value in given.items():
            arguments[self.parameters[name].name] = value
        return self.cls(**arguments, **extra)

    def values(self, given):
        """Every argument of `cls` under its own name: `given`, else its default.

        A required argument that was not given is `None`.

        Args:
            given: dict. Arguments under the wrapper's names; other entries
                are ignored.

        Example:
        >>> arguments = ArgumentsOf(keras.layers.Dropout, renamed={"dropout": "rate"})
        >>> arguments.values({"dropout": 0.5, "name": "drop"})
        {'rate': 0.5, 'noise_shape': None, 'seed': None}
        """
        values = {}
        for name, p in self.parameters.items():
            default = None if p.default is inspect.Parameter.empty else p.default
            values[p.name] = given.get(name, default)
        return values

    def config(self, instance):
        """`{name: value}` of every argument, read from `instance.get_config()`.

        Example:
        >>> arguments = ArgumentsOf(keras.layers.Dropout, renamed={"dropout": "rate"})
        >>> arguments.config(keras.layers.Dropout(0.1, seed=3))
        {'dropout': 0.1, 'noise_shape': None, 'seed': 3}
        """
        config = instance.get_config()
        return {name: config[p.name] for name, p in self.parameters.items()}

    def copy_attributes(self, instance, target, skip=()):
        """Sets each argument on `target` as an attribute, read from `instance`.

        The value is `instance`'s attribute of that name, or its config entry
        when it has none.

        Args:
            instance: an instance of `cls`.
            target: the object to set the attributes on.
            skip: names not to set (e.g. one that `target` uses otherwise).

        Example:
        >>> class Head:
        ...     pass
        >>> head = Head()
        >>> arguments = ArgumentsOf(keras.layers.Dropout, renamed={"dropout": "rate"})
        >>> dropout = keras.layers.Dropout(0.1, seed=3)
        >>> arguments.copy_attributes(dropout, head, skip=("noise_shape",))
        >>> head.dropout, head.seed, hasattr(head, "noise_shape")
        (0.1, 3, False)
        """
        config = instance.get_config()
        for name, p in self.parameters.items():
            if name not in skip:
                setattr(target, name, getattr(instance, p.name, config[p.name]))

    def check_agrees(self, owner, given, instance):
        """Refuses arguments that disagree with a given instance of `cls`.

        Raises:
            ValueError: naming the first argument whose value differs from
                `instance`'s.

        Example:
        >>> arguments = ArgumentsOf(keras.layers.Dense, renamed={"width": "units"})
        >>> dense = keras.layers.Dense(4)
        >>> arguments.check_agrees("Head", {"width": 4}, dense)  # agrees
        >>> arguments.check_agrees("Head", {"width": 8}, dense)
        Traceback (most recent call last):
        ...
        ValueError: Head: `width` disagrees with the given Dense's units=4. Received: width=8
        """
        config = instance.get_config()
        for name, value in given.items():
            theirs = config[self.parameters[name].name]
            if _comparable(value) != _comparable(theirs):
                raise ValueError(
                    f"{owner}: `{name}` disagrees with the given "
                    f"{self.cls.__name__}'s {self.parameters[name].name}="
                    f"{theirs!r:.80}. Received: {name}={value!r:.80}"
                )


def _comparable(value):
    """A value as configs store it (lists, serialized layers)."""
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, keras.layers.Layer):
        return keras.saving.serialize_keras_object(value)
    return value
