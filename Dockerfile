# kaipolicy's image: the scheduler (`kaipolicy run`) and the binder (`kaipolicy binder`) in one.
# Built from the wheel, so the image holds exactly what `pip install kaipolicy` installs (the
# default rule bundle and the schemas go to /usr/local/share/kaipolicy/).
#
#   docker build -t <registry>/kaipolicy:0.1.0 .
#
# The first stage builds the wheel from the source; the second installs it and nothing else.
FROM python:3.12-slim-bookworm AS wheel
WORKDIR /src
COPY pyproject.toml README.md ./
COPY kaipolicy/ kaipolicy/
COPY policies/ policies/
COPY schemas/ schemas/
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.12-slim-bookworm
COPY --from=wheel /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
# The uid the chart runs it as (runAsNonRoot needs a numeric user).
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["kaipolicy"]
CMD ["run"]
