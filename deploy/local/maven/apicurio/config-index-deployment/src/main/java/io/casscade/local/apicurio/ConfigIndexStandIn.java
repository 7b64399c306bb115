package io.casscade.local.apicurio;

import java.util.ArrayList;
import java.util.List;

import org.jboss.jandex.AnnotationInstance;
import org.jboss.jandex.AnnotationValue;
import org.jboss.jandex.DotName;
import org.jboss.jandex.Type;

import apicurio.common.app.components.config.index.DynamicPropertiesInfoRecorder;
import io.apicurio.common.apps.config.DynamicConfigPropertyDef;
import io.apicurio.common.apps.config.DynamicConfigPropertyList;
import io.quarkus.arc.deployment.BeanDiscoveryFinishedBuildItem;
import io.quarkus.arc.deployment.SyntheticBeanBuildItem;
import io.quarkus.arc.processor.InjectionPointInfo;
import io.quarkus.deployment.annotations.BuildStep;
import io.quarkus.deployment.annotations.ExecutionTime;
import io.quarkus.deployment.annotations.Record;
import io.quarkus.deployment.builditem.FeatureBuildItem;

/**
 * Build steps of the config-index extension, whose deployment jar Maven Central does not
 * serve. The registry injects {@code DynamicConfigPropertyList}: the config properties an
 * admin may change at run time, i.e. fields annotated {@code @ConfigProperty} and
 * {@code @Dynamic}, typed {@code Supplier<T>}. This finds them among the injection points
 * and hands their definitions to the served runtime recorder.
 */
public class ConfigIndexStandIn {

    private static final DotName CONFIG_PROPERTY =
            DotName.createSimple("org.eclipse.microprofile.config.inject.ConfigProperty");
    private static final DotName DYNAMIC =
            DotName.createSimple("io.apicurio.common.apps.config.Dynamic");

    @BuildStep
    FeatureBuildItem feature() {
        return new FeatureBuildItem("apicurio-config-index");
    }

    @BuildStep
    @Record(ExecutionTime.RUNTIME_INIT)
    SyntheticBeanBuildItem dynamicProperties(DynamicPropertiesInfoRecorder recorder,
                                             BeanDiscoveryFinishedBuildItem beans) {
        List<DynamicConfigPropertyDef> defs = new ArrayList<>();
        for (InjectionPointInfo point : beans.getInjectionPoints()) {
            DynamicConfigPropertyDef def = definition(point);
            if (def != null) {
                defs.add(def);
            }
        }
        // A runtime-init synthetic bean: the list is built when the app starts, from
        // values recorded here at build time.
        return SyntheticBeanBuildItem.configure(DynamicConfigPropertyList.class)
                .runtimeValue(recorder.initializePropertiesInfo(defs))
                .unremovable()
                .setRuntimeInit()
                .done();
    }

    /** The definition of a dynamic property's injection point, or null for any other. */
    private static DynamicConfigPropertyDef definition(InjectionPointInfo point) {
        AnnotationInstance config = point.getRequiredQualifier(CONFIG_PROPERTY);
        if (config == null || !point.isField()) {
            return null;
        }
        AnnotationInstance dynamic = point.getTarget().asField().annotation(DYNAMIC);
        if (dynamic == null) {
            return null;
        }
        String name = config.value("name").asString();
        AnnotationValue dflt = config.value("defaultValue");
        if (dflt == null) {
            // the registry's admin API shows and resets to the default: it must have one
            throw new IllegalStateException("dynamic config property " + name
                    + " has no defaultValue");
        }
        // Supplier<T>: the property's type is T
        Type valueType = point.getRequiredType().asParameterizedType().arguments().get(0);
        DynamicConfigPropertyDef def =
                new DynamicConfigPropertyDef(name, load(valueType), dflt.asString());
        AnnotationValue label = dynamic.value("label");
        AnnotationValue description = dynamic.value("description");
        AnnotationValue requires = dynamic.value("requires");
        if (label != null) {
            def.setLabel(label.asString());
        }
        if (description != null) {
            def.setDescription(description.asString());
        }
        if (requires != null) {
            def.setRequires(requires.asStringArray());
        }
        return def;
    }

    private static Class<?> load(Type type) {
        String name = type.name().toString();
        try {
            return Class.forName(name, false, Thread.currentThread().getContextClassLoader());
        } catch (ClassNotFoundException e) {
            throw new IllegalStateException("type of a dynamic config property: " + name, e);
        }
    }
}
